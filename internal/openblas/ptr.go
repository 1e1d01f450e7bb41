package openblas

import "unsafe"

func add(p *byte, n uintptr) unsafe.Pointer { return unsafe.Add(unsafe.Pointer(p), n) }
