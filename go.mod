module github.com/fastwam/actionexpert

go 1.26
