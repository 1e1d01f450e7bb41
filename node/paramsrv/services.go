package paramsrv

import (
	"context"
	"fmt"

	"github.com/fastwam/actionexpert/msgs"
)

// Service and topic names, relative to the node (the adapter prefixes
// "~/"), except TopicParameterEvents, which is absolute.
const (
	ServiceListParameters          = "list_parameters"
	ServiceGetParameters           = "get_parameters"
	ServiceGetParameterTypes       = "get_parameter_types"
	ServiceSetParameters           = "set_parameters"
	ServiceSetParametersAtomically = "set_parameters_atomically"
	ServiceDescribeParameters      = "describe_parameters"
	TopicParameterEvents           = "/parameter_events"
)

// Handler answers one service: request CDR bytes in, response CDR bytes
// out. An error means the request was not a valid message of the service's
// request type (nothing was done); the adapter logs it and sends no
// response.
type Handler func(ctx context.Context, request []byte) ([]byte, error)

// Service is one service the server answers.
type Service struct {
	Name    string // relative name, e.g. "get_parameters"
	Type    string // e.g. msgs.SrvGetParameters
	Handler Handler
}

// Services returns the six parameter services with their types and
// handlers.
func (s *Server) Services() []Service {
	return []Service{
		{ServiceListParameters, msgs.SrvListParameters, s.HandleListParameters},
		{ServiceGetParameters, msgs.SrvGetParameters, s.HandleGetParameters},
		{ServiceGetParameterTypes, msgs.SrvGetParameterTypes, s.HandleGetParameterTypes},
		{ServiceSetParameters, msgs.SrvSetParameters, s.HandleSetParameters},
		{ServiceSetParametersAtomically, msgs.SrvSetParametersAtomically, s.HandleSetParametersAtomically},
		{ServiceDescribeParameters, msgs.SrvDescribeParameters, s.HandleDescribeParameters},
	}
}

func decodeRequest(name, typ string, request []byte, m interface{ UnmarshalCDR([]byte) error }) error {
	if err := m.UnmarshalCDR(request); err != nil {
		return fmt.Errorf("paramsrv: %s request is not a %s_Request: %w", name, typ, err)
	}
	return nil
}

// HandleListParameters serves ~/list_parameters.
func (s *Server) HandleListParameters(_ context.Context, request []byte) ([]byte, error) {
	var req msgs.ListParametersRequest
	if err := decodeRequest(ServiceListParameters, msgs.SrvListParameters, request, &req); err != nil {
		return nil, err
	}
	resp := msgs.ListParametersResponse{Result: s.List(req.Prefixes, req.Depth)}
	return resp.MarshalCDR()
}

// HandleGetParameters serves ~/get_parameters: the values in request order,
// or none when a name is not declared.
func (s *Server) HandleGetParameters(_ context.Context, request []byte) ([]byte, error) {
	var req msgs.GetParametersRequest
	if err := decodeRequest(ServiceGetParameters, msgs.SrvGetParameters, request, &req); err != nil {
		return nil, err
	}
	resp := msgs.GetParametersResponse{Values: s.Get(req.Names)}
	return resp.MarshalCDR()
}

// HandleGetParameterTypes serves ~/get_parameter_types: the types in
// request order, or none when a name is not declared.
func (s *Server) HandleGetParameterTypes(_ context.Context, request []byte) ([]byte, error) {
	var req msgs.GetParameterTypesRequest
	if err := decodeRequest(ServiceGetParameterTypes, msgs.SrvGetParameterTypes, request, &req); err != nil {
		return nil, err
	}
	resp := msgs.GetParameterTypesResponse{Types: s.Types(req.Names)}
	return resp.MarshalCDR()
}

// HandleSetParameters serves ~/set_parameters: each parameter set on its
// own, one result each.
func (s *Server) HandleSetParameters(ctx context.Context, request []byte) ([]byte, error) {
	var req msgs.SetParametersRequest
	if err := decodeRequest(ServiceSetParameters, msgs.SrvSetParameters, request, &req); err != nil {
		return nil, err
	}
	resp := msgs.SetParametersResponse{Results: s.SetEach(ctx, req.Parameters)}
	return resp.MarshalCDR()
}

// HandleSetParametersAtomically serves ~/set_parameters_atomically: all or
// none, one result.
func (s *Server) HandleSetParametersAtomically(ctx context.Context, request []byte) ([]byte, error) {
	var req msgs.SetParametersAtomicallyRequest
	if err := decodeRequest(ServiceSetParametersAtomically, msgs.SrvSetParametersAtomically, request, &req); err != nil {
		return nil, err
	}
	resp := msgs.SetParametersAtomicallyResponse{Result: s.SetAtomically(ctx, req.Parameters)}
	return resp.MarshalCDR()
}

// HandleDescribeParameters serves ~/describe_parameters: the descriptors in
// request order, or none when a name is not declared.
func (s *Server) HandleDescribeParameters(_ context.Context, request []byte) ([]byte, error) {
	var req msgs.DescribeParametersRequest
	if err := decodeRequest(ServiceDescribeParameters, msgs.SrvDescribeParameters, request, &req); err != nil {
		return nil, err
	}
	resp := msgs.DescribeParametersResponse{Descriptors: s.Descriptors(req.Names)}
	return resp.MarshalCDR()
}
