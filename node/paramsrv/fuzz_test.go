package paramsrv_test

import (
	"testing"

	"github.com/fastwam/actionexpert/msgs"
)

// FuzzSetParameters: any request bytes give an error or a response that
// decodes, with one result per parameter of the request.
func FuzzSetParameters(f *testing.F) {
	f.Add(goldenSeed(f, "rcl_set_parameters_request"))
	f.Add([]byte{0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, _, _ := newServer(t)
		b, err := s.HandleSetParameters(ctx, data)
		if err != nil {
			return
		}
		var req msgs.SetParametersRequest
		var resp msgs.SetParametersResponse
		if req.UnmarshalCDR(data) != nil || resp.UnmarshalCDR(b) != nil || len(resp.Results) != len(req.Parameters) {
			t.Fatalf("answered % x with % x", data, b)
		}
	})
}

// BenchmarkListParameters: `ros2 param list` against the fake node.
func BenchmarkListParameters(b *testing.B) {
	s, _, _ := newServer(b)
	req, _ := (&msgs.ListParametersRequest{}).MarshalCDR()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.HandleListParameters(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
