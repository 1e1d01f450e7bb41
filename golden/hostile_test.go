package golden_test

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/internal/npztest"
)

// small is a valid bundle-format golden with tiny sizes: S=2, a=3, one
// layer of two video tokens of width 4, two context tokens of width 4.
func small() []npztest.Array {
	f := func(n int, scale float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = scale * float32(i+1)
		}
		return v
	}
	return []npztest.Array{
		{Name: "latents_action", Shape: []int{1, 2, 3}, Data: f(6, 0.5)},
		{Name: "timestep", Shape: []int{1}, Data: []float32{500}},
		{Name: "video_keys", Shape: []int{1, 1, 2, 4}, Data: f(8, 0.25)},
		{Name: "video_values", Shape: []int{1, 1, 2, 4}, Data: f(8, -0.25)},
		{Name: "context", Shape: []int{1, 2, 4}, Data: f(8, 0.125)},
		{Name: "context_mask", Shape: []int{1, 2}, Data: []bool{true, false}},
		{Name: "pred_noise", Shape: []int{1, 2, 3}, Data: f(6, -0.5)},
	}
}

// members encodes arrays as numpy.savez members.
func members(t *testing.T, arrays []npztest.Array) []npztest.Member {
	t.Helper()
	out := make([]npztest.Member, len(arrays))
	for i, a := range arrays {
		b, err := npztest.NPY(a)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = npztest.Member{Name: a.Name + ".npy", Data: b}
	}
	return out
}

// with replaces the member of the same name (or appends it) in ms.
func with(ms []npztest.Member, m npztest.Member) []npztest.Member {
	out := append([]npztest.Member(nil), ms...)
	for i := range out {
		if out[i].Name == m.Name {
			out[i] = m
			return out
		}
	}
	return append(out, m)
}

func archive(t *testing.T, ms []npztest.Member) []byte {
	t.Helper()
	b, err := npztest.Zip(ms...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// header writes a .npy image with the header text given (numpy pads it to
// 64 bytes and ends it with a newline; so does this, unless raw).
func header(text string, data []byte) []byte {
	for (10+len(text)+1)%64 != 0 {
		text += " "
	}
	return npztest.Raw(1, text+"\n", data)
}

// deflated is a raw deflate stream of n zero bytes after prefix, and its
// CRC.
func deflated(t *testing.T, prefix []byte, n int) ([]byte, uint32) {
	t.Helper()
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	sum := crc32.NewIEEE()
	mw := func(p []byte) {
		w.Write(p)
		sum.Write(p)
	}
	mw(prefix)
	zero := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, len(zero))
		mw(zero[:k])
		n -= k
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), sum.Sum32()
}

// allocated runs f and returns the bytes it allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHostileArchives feeds one hostile variant of the small golden per
// row and checks the error names the file, the array or member and the
// reason, and that parsing allocates little whatever the file declares.
func TestHostileArchives(t *testing.T) {
	base := members(t, small())
	lat := small()[0]
	latData, _ := npztest.Payload(lat)
	bomb, bombCRC := deflated(t, nil, 16<<20)
	hdr1 := header("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3), }", nil)
	lie, lieCRC := deflated(t, hdr1, 16<<20)
	for _, tc := range []struct {
		name string
		ms   []npztest.Member
		want string
	}{
		{"shape 2^62", with(base, npztest.Member{Name: "latents_action.npy",
			Data: header("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 1), }", latData)}),
			`array "latents_action" (member "latents_action.npy") is present but unreadable: .npy header "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 1), }": shape (4611686018427387904, 1) of <f4 is too large to address`},
		{"shape 2^63", with(base, npztest.Member{Name: "latents_action.npy",
			Data: header("{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775808,), }", latData)}),
			"shape dimension 0 is 9223372036854775808, want a non-negative int below 2^63"},
		{"negative dimension", with(base, npztest.Member{Name: "video_keys.npy",
			Data: header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 1, 2, 4), }", latData)}),
			`array "video_keys" (member "video_keys.npy") is present but unreadable: .npy header "{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 1, 2, 4), }": shape dimension 0 is -1, want a non-negative int below 2^63`},
		{"header length 0xFFFFFFF0", with(base, npztest.Member{Name: "context.npy",
			Data: npztest.Raw(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 4), }\n", nil)[:12]}),
			""},
		{"declared (1,2^28,7) in a small member", with(base, npztest.Member{Name: "latents_action.npy",
			Data: header("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 268435456, 7), }", latData)}),
			`array "latents_action" (member "latents_action.npy") is present but unreadable: the header declares shape [1 268435456 7] of <f4, 7516192768 bytes of data, but the member holds 24 after its 128-byte header`},
		{"short data", with(base, npztest.Member{Name: "pred_noise.npy",
			Data: header("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3), }", latData[:20])}),
			`array "pred_noise" (member "pred_noise.npy") is present but unreadable: the header declares shape [1 2 3] of <f4, 24 bytes of data, but the member holds 20`},
		{"needed member inflating past its declared size", with(base, npztest.Member{Name: "latents_action.npy", Raw: lie,
			Header: &zip.FileHeader{Method: zip.Deflate, CRC32: lieCRC, CompressedSize64: uint64(len(lie)), UncompressedSize64: uint64(len(hdr1) + 24)}}),
			`array "latents_action" (member "latents_action.npy") is present but unreadable: the member inflates to more than the 152 bytes its zip entry declares`},
		{"needed member claiming more than deflate can give", with(base, npztest.Member{Name: "latents_action.npy", Raw: bomb[:1000],
			Header: &zip.FileHeader{Method: zip.Deflate, CRC32: bombCRC, CompressedSize64: 1000, UncompressedSize64: 16 << 20}}),
			`array "latents_action" (member "latents_action.npy") is present but unreadable: the zip entry claims 16777216 bytes inflated from 1000, more than deflate can expand (1032:1)`},
		{"stored member whose sizes differ", with(base, npztest.Member{Name: "timestep.npy", Raw: header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", []byte{0, 0, 0, 0}),
			Header: &zip.FileHeader{Method: zip.Store, CompressedSize64: 132, UncompressedSize64: 1 << 30}}),
			`array "timestep" (member "timestep.npy") is present but unreadable: the stored zip entry claims 1073741824 bytes but holds 132`},
		{"unknown compression", with(base, npztest.Member{Name: "timestep.npy", Raw: []byte("xx"),
			Header: &zip.FileHeader{Method: 12, CompressedSize64: 2, UncompressedSize64: 2}}),
			`array "timestep" (member "timestep.npy") is present but unreadable: the zip entry uses compression method 12, want stored (0) or deflate (8)`},
		{"duplicate member", append(append([]npztest.Member(nil), base...), base[6]),
			`member "pred_noise.npy" appears twice; numpy reads the last copy, refusing the ambiguous archive`},
		{"bare and .npy names", append(append([]npztest.Member(nil), base...), npztest.Member{Name: "context", Data: base[4].Data}),
			`members "context.npy" and "context" both hold array "context"; refusing the ambiguous archive`},
		{"missing", base[:6], ""},
		{"missing array", append(append([]npztest.Member(nil), base[:3]...), base[4:]...), `array "video_values" is missing`},
		{"present but not .npy", with(base, npztest.Member{Name: "video_values.npy", Data: []byte("not an array at all")}),
			`array "video_values" (member "video_values.npy") is present but unreadable: not an .npy array (no \x93NUMPY magic)`},
		{"7-byte member", with(base, npztest.Member{Name: "video_values.npy", Data: []byte("\x93NUMPY\x01")}),
			`array "video_values" (member "video_values.npy") is present but unreadable: truncated .npy preamble: 7 of 8 bytes`},
		{"6-byte member", with(base, npztest.Member{Name: "video_values.npy", Data: []byte("\x93NUMPY")}),
			`array "video_values" (member "video_values.npy") is present but unreadable: truncated .npy preamble: 6 of 8 bytes`},
		{"3-byte member", with(base, npztest.Member{Name: "video_values.npy", Data: []byte("\x93NU")}),
			`array "video_values" (member "video_values.npy") is present but unreadable: truncated .npy preamble: 3 of 8 bytes`},
		{"7 bytes, not the magic", with(base, npztest.Member{Name: "video_values.npy", Data: []byte("\x93NUMPX\x01")}),
			`array "video_values" (member "video_values.npy") is present but unreadable: not an .npy array (no \x93NUMPY magic)`},
		{"empty member", with(base, npztest.Member{Name: "video_values.npy", Data: []byte{}}),
			`array "video_values" (member "video_values.npy") is present but unreadable: not an .npy array (no \x93NUMPY magic)`},
		{"9-byte member", with(base, npztest.Member{Name: "video_values.npy", Data: []byte("\x93NUMPY\x01\x00\x10")}),
			`array "video_values" (member "video_values.npy") is present but unreadable: truncated .npy header length: unexpected EOF`},
		{"11-byte version 2 member", with(base, npztest.Member{Name: "video_values.npy", Data: []byte("\x93NUMPY\x02\x00\x10\x00\x00")}),
			`array "video_values" (member "video_values.npy") is present but unreadable: truncated .npy header length: unexpected EOF`},
		{"header cut short", with(base, npztest.Member{Name: "video_values.npy", Data: []byte("\x93NUMPY\x01\x00\x10\x00{'de")}),
			`array "video_values" (member "video_values.npy") is present but unreadable: .npy header declares 16 bytes, only 4 present: unexpected EOF`},
		{"bad version", with(base, npztest.Member{Name: "video_values.npy", Data: append([]byte("\x93NUMPY\x04\x00"), base[3].Data[8:]...)}),
			`array "video_values" (member "video_values.npy") is present but unreadable: .npy format version 4.0, want 1.0, 2.0 or 3.0`},
		{"header not a dict", with(base, npztest.Member{Name: "context.npy", Data: header("['descr', '<f4']", nil)}),
			`array "context" (member "context.npy") is present but unreadable: .npy header "['descr', '<f4']": is a Python list, want a dict`},
		{"header with an extra key", with(base, npztest.Member{Name: "context.npy", Data: header("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 4), 'x': 0}", nil)}),
			`has the key "x", want only the keys 'descr', 'fortran_order' and 'shape'`},
		{"unterminated header", with(base, npztest.Member{Name: "context.npy", Data: header("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 4)", nil)}),
			`is not a Python literal at character`},
		{"brackets nested deep", with(base, npztest.Member{Name: "context.npy", Data: header("{'descr': '<f4', 'fortran_order': False, 'shape': "+strings.Repeat("(", 200)+"1"+strings.Repeat(")", 200)+"}", nil)}),
			`brackets nested deeper than 64`},
		{"header longer than numpy allows", with(base, npztest.Member{Name: "context.npy", Data: npztest.Raw(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 4)}"+strings.Repeat(" ", 10000), nil)}),
			`.npy header of 10060 bytes is longer than numpy's limit of 10000 characters`},
		{"unsupported dtype", with(base, npztest.Member{Name: "context.npy", Data: header("{'descr': '<U5', 'fortran_order': False, 'shape': (1, 2, 4)}", nil)}),
			`descr "<U5" is not supported`},
		{"fortran order", with(base, npztest.Member{Name: "context.npy", Data: header("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 2, 4)}", make([]byte, 32))}),
			`array "context" (member "context.npy") is Fortran-ordered with shape [1 2 4]; write it C-ordered`},
		{"CRC mismatch", with(base, npztest.Member{Name: "context.npy", Raw: base[4].Data,
			Header: &zip.FileHeader{Method: zip.Store, CRC32: 12345, CompressedSize64: uint64(len(base[4].Data)), UncompressedSize64: uint64(len(base[4].Data))}}),
			`array "context" (member "context.npy") is present but unreadable: damaged: `},
		{"CRC zero but data", with(base, npztest.Member{Name: "context.npy", Raw: base[4].Data,
			Header: &zip.FileHeader{Method: zip.Store, CRC32: 0, CompressedSize64: uint64(len(base[4].Data)), UncompressedSize64: uint64(len(base[4].Data))}}),
			`array "context" (member "context.npy") is present but unreadable: damaged: zip checksum`},
		{"visible video not whole", append(append([]npztest.Member(nil), base...), members(t, []npztest.Array{{Name: "visible_video", Shape: []int{1}, Data: []float32{1.5}}})...),
			`visible_video is 1.5, want a whole number of tokens in [0,2]`},
		{"zero action tokens", with(base, members(t, []npztest.Array{{Name: "latents_action", Shape: []int{1, 0, 3}, Data: []float32{}}})[0]),
			`latents_action has shape [1 0 3], want [1,S,a] or [S,a] with S, a > 0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := archive(t, tc.ms)
			var err error
			n := allocated(func() { _, err = golden.Parse(t.Context(), "hostile.npz", img) })
			switch tc.name {
			case "header length 0xFFFFFFF0":
				// Built below: the member's header length field only.
				tc.want = `array "context" (member "context.npy") is present but unreadable: .npy header of 4294967280 bytes is longer than numpy's limit of 10000 characters`
				ms := with(tc.ms, npztest.Member{Name: "context.npy", Data: append([]byte("\x93NUMPY\x02\x00\xf0\xff\xff\xff"), make([]byte, 100)...)})
				img = archive(t, ms)
				n = allocated(func() { _, err = golden.Parse(t.Context(), "hostile.npz", img) })
			case "missing":
				tc.want = "no reference prediction (one of pred_noise, pred, reference, expected)"
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "golden: hostile.npz: ") {
				t.Errorf("got %v\nwant an error containing %q", err, tc.want)
			}
			if n > 8<<20 {
				t.Errorf("parsing allocated %d MiB", n>>20)
			}
		})
	}
}

// TestHostileAccepted covers legal files an earlier reader refused or
// crashed on.
func TestHostileAccepted(t *testing.T) {
	base := members(t, small())
	latData, _ := npztest.Payload(small()[0])
	for _, tc := range []struct {
		name string
		m    npztest.Member
	}{
		{"keys in another order", npztest.Member{Name: "latents_action.npy",
			Data: header("{'shape': (1, 2, 3), 'fortran_order': False, 'descr': '<f4'}", latData)}},
		{"no newline", npztest.Member{Name: "latents_action.npy",
			Data: npztest.Raw(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3)}", latData)}},
		{"version 3 header", npztest.Member{Name: "latents_action.npy",
			Data: npztest.Raw(3, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3)} # \u00e9\n", latData)}},
		{"deflated", npztest.Member{Name: "latents_action.npy", Data: base[0].Data, Deflate: true}},
	} {
		c, err := golden.Parse(t.Context(), tc.name, archive(t, with(base, tc.m)))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if c.Latents[5] != 3 || c.ActionTokens != 2 || c.ActionDim != 3 || c.Pred[0] != -0.5 {
			t.Errorf("%s: latents %v, %dx%d", tc.name, c.Latents, c.ActionTokens, c.ActionDim)
		}
	}
}

// TestUnneededMembers checks that members the case does not need cost
// neither memory nor a refusal: a 16 MiB bomb is skipped after its header,
// as is a member whose header and zip entry disagree or whose CRC is
// wrong; small extras are read.
func TestUnneededMembers(t *testing.T) {
	base := members(t, small())
	bombHdr := header("{'descr': '<f4', 'fortran_order': False, 'shape': (4194304,), }", nil)
	bomb, bombCRC := deflated(t, bombHdr, 16<<20)
	smallHdr := header("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", nil)
	lie, lieCRC := deflated(t, smallHdr, 16<<20)
	extra := members(t, []npztest.Array{{Name: "pred_noise_bf16", Shape: []int{1, 2, 3}, Data: []float32{1, 2, 3, 4, 5, 6}}})[0]
	wrongCRC := members(t, []npztest.Array{{Name: "bad_crc", Shape: []int{2}, Data: []float32{1, 2}}})[0]
	ms := append(append([]npztest.Member(nil), base...),
		npztest.Member{Name: "bomb.npy", Raw: bomb, Header: &zip.FileHeader{Method: zip.Deflate, CRC32: bombCRC,
			CompressedSize64: uint64(len(bomb)), UncompressedSize64: uint64(len(bombHdr) + 16<<20)}},
		npztest.Member{Name: "liar.npy", Raw: lie, Header: &zip.FileHeader{Method: zip.Deflate, CRC32: lieCRC,
			CompressedSize64: uint64(len(lie)), UncompressedSize64: uint64(len(smallHdr) + 16<<20)}},
		npztest.Member{Name: wrongCRC.Name, Raw: wrongCRC.Data, Header: &zip.FileHeader{Method: zip.Store, CRC32: 99,
			CompressedSize64: uint64(len(wrongCRC.Data)), UncompressedSize64: uint64(len(wrongCRC.Data))}},
		npztest.Member{Name: "notes.txt", Data: []byte("hello")},
		extra)
	img := archive(t, ms)
	if len(img) > 1<<20 {
		t.Fatalf("the test archive is %d bytes", len(img))
	}
	var c *golden.Case
	var err error
	n := allocated(func() { c, err = golden.Parse(t.Context(), "unneeded.npz", img) })
	if err != nil {
		t.Fatal(err)
	}
	if n > 8<<20 {
		t.Errorf("parsing allocated %d MiB", n>>20)
	}
	if got := c.Extra["pred_noise_bf16"]; len(got) != 6 || got[5] != 6 || len(c.Extra) != 1 {
		t.Errorf("extras %v", c.Extra)
	}
	want := []string{
		"bomb: holds 4194304 elements, more than the 39 left for extras",
		"liar: the header declares shape [4] of <f4, 16 bytes of data, but the member holds 16777216",
		"bad_crc: damaged: ",
		"notes.txt: not an .npy array",
	}
	if len(c.Skipped) != len(want) {
		t.Fatalf("skipped %q, want %d entries", c.Skipped, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(c.Skipped[i], w) {
			t.Errorf("skipped[%d] = %q, want it to start %q", i, c.Skipped[i], w)
		}
	}
}

// cancelAfter is a context whose Err reports cancellation from its n-th
// call on, to stop a load in the middle.
type cancelAfter struct {
	context.Context
	n int
}

func (c *cancelAfter) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// TestCancel stops loads before the first member and in the middle of a
// large array, and checks Load reads a file from disk the same way.
func TestCancel(t *testing.T) {
	arrays := small()
	big := make([]float32, 3<<20/8) // 1.5 MiB of keys and of values: [1,1,98304,4]
	arrays[2] = npztest.Array{Name: "video_keys", Shape: []int{1, 1, len(big) / 4, 4}, Data: big}
	arrays[3] = npztest.Array{Name: "video_values", Shape: []int{1, 1, len(big) / 4, 4}, Data: big}
	img := archive(t, members(t, arrays))
	path := filepath.Join(t.TempDir(), "big.npz")
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := golden.Load(t.Context(), path); err != nil || len(c.Chunk.VideoKeys) != len(big) {
		t.Fatalf("load: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := golden.Load(ctx, path); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), `loading stopped before array "latents_action"`) {
		t.Errorf("cancelled before: %v", err)
	}
	// Count the checks of a whole load, then stop at each step of the way.
	counter := &cancelAfter{Context: t.Context(), n: 1 << 30}
	if _, err := golden.Parse(counter, "big.npz", img); err != nil {
		t.Fatal(err)
	}
	checks := 1<<30 - counter.n
	if checks < 2+2+14 { // at least one check per MiB of keys and values and two per array
		t.Errorf("only %d cancellation checks in a load of 3 MiB", checks)
	}
	for i := range checks {
		_, err := golden.Parse(&cancelAfter{Context: t.Context(), n: i}, "big.npz", img)
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "golden: big.npz: loading stopped before array ") {
			t.Fatalf("cancelled at check %d: %v", i, err)
		}
	}
	dir := t.TempDir()
	if _, err := golden.Load(t.Context(), dir); err == nil || err.Error() != "golden: "+dir+" is a folder, want an .npz golden file: not a regular file" {
		t.Errorf("directory: %v", err)
	}
	// A FIFO would block os.Open until a writer came; it is refused at once.
	fifo := filepath.Join(dir, "golden.npz")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := golden.Load(t.Context(), fifo); err == nil || err.Error() != "golden: "+fifo+" is a named pipe (FIFO), want an .npz golden file: not a regular file" {
		t.Errorf("FIFO: %v", err)
	}
}

// zipEdit builds the small golden archive and changes one header field of
// member name in its raw bytes: the local file header's copy of the name,
// or the general-purpose flags of both headers.
func zipEdit(t *testing.T, name string, edit func(img []byte, local, central int)) []byte {
	t.Helper()
	img := archive(t, members(t, small()))
	find := func(sig string, nameAt, lenAt int) int {
		for at := 0; ; at += 4 {
			next := bytes.Index(img[at:], []byte(sig))
			if next < 0 {
				t.Fatalf("no %q header for %s", sig, name)
			}
			at += next
			n := int(img[at+lenAt]) | int(img[at+lenAt+1])<<8
			if string(img[at+nameAt:min(at+nameAt+n, len(img))]) == name {
				return at
			}
		}
	}
	local, central := find("PK\x03\x04", 30, 26), find("PK\x01\x02", 46, 28)
	edit(img, local, central)
	return img
}

// TestZipHeaders covers members Python's zipfile refuses and archive/zip
// reads: a local header naming another member than the central directory,
// and an encrypted entry; needed ones fail the load, unneeded ones are
// skipped with the reason.
func TestZipHeaders(t *testing.T) {
	renamed := func(img []byte, local, _ int) { copy(img[local+30:], "timestex") }
	encrypted := func(img []byte, local, central int) { img[local+6] |= 1; img[central+8] |= 1 }
	for _, tc := range []struct {
		name string
		img  []byte
		want string
	}{
		{"local name differs", zipEdit(t, "timestep.npy", renamed),
			`golden: hostile.npz: array "timestep" (member "timestep.npy") is present but unreadable: the zip entry's local header names "timestex.npy", the central directory "timestep.npy"; refusing the ambiguous member (Python's zipfile does too)`},
		{"encrypted", zipEdit(t, "context.npy", encrypted),
			`golden: hostile.npz: array "context" (member "context.npy") is present but unreadable: the zip entry is encrypted (general-purpose flag bit 0 set); numpy cannot read it without a password, and neither can this reader`},
	} {
		if _, err := golden.Parse(t.Context(), "hostile.npz", tc.img); err == nil || err.Error() != tc.want {
			t.Errorf("%s: got %v\nwant %s", tc.name, err, tc.want)
		}
	}
	// The same edits on a member the case does not need.
	ms := append(members(t, small()), members(t, []npztest.Array{{Name: "extra", Shape: []int{2}, Data: []float32{1, 2}}})...)
	img := archive(t, ms)
	for _, tc := range []struct {
		edit func([]byte, int, int)
		want string
	}{
		{func(img []byte, local, c int) { copy(img[local+30:], "extrb") }, `extra: the zip entry's local header names "extrb.npy", the central directory "extra.npy"`},
		{encrypted, "extra: the zip entry is encrypted"},
	} {
		b := bytes.Clone(img)
		local := bytes.LastIndex(b[:bytes.Index(b, []byte("PK\x01\x02"))], []byte("PK\x03\x04"))
		central := bytes.LastIndex(b, []byte("PK\x01\x02"))
		tc.edit(b, local, central)
		c, err := golden.Parse(t.Context(), "extra.npz", b)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Skipped) != 1 || !strings.HasPrefix(c.Skipped[0], tc.want) || len(c.Extra) != 0 {
			t.Errorf("skipped %q, extras %v, want %q", c.Skipped, c.Extra, tc.want)
		}
	}
}
