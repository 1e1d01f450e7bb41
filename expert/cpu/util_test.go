package cpu

import "strconv"

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', 6, 64) }
func itoa(i int) string         { return strconv.Itoa(i) }
