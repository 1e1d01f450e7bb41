package bag

// PeakHeldBytes returns the largest number of decompressed chunk bytes any
// one file of r held at a time so far.
func PeakHeldBytes(r *Reader) int64 {
	var peak int64
	for _, bf := range r.files {
		peak = max(peak, bf.peakHeld)
		if m, ok := bf.src.(*mcapSource); ok {
			peak = max(peak, m.peakHeld)
		}
	}
	return peak
}

// HeldBytes returns the decompressed chunk bytes the files of r hold now.
func HeldBytes(r *Reader) int64 {
	var n int64
	for _, bf := range r.files {
		if m, ok := bf.src.(*mcapSource); ok {
			n += m.held
		}
	}
	return n
}

// SQLiteWalkQuery is the query of the sqlite3 reader's walk after its first
// batch (parameters: timestamp, id, batch size).
const SQLiteWalkQuery = sqliteWalkNext
