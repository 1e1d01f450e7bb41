package bag

// PeakHeldBytes returns the largest number of decompressed chunk bytes any
// one file of r held at a time so far.
func PeakHeldBytes(r *Reader) int64 {
	var peak int64
	for _, f := range r.files {
		peak = max(peak, f.peakHeld)
	}
	return peak
}

// HeldBytes returns the decompressed chunk bytes the files of r hold now.
func HeldBytes(r *Reader) int64 {
	var n int64
	for _, f := range r.files {
		n += f.held
	}
	return n
}
