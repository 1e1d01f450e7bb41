package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/node/paramsrv"
)

// The managed node answers rcl_interfaces' parameter services (package
// paramsrv) from its parameter table: Managed implements paramsrv.Owner.

var _ paramsrv.Owner = (*Managed)(nil)

// ParameterNames implements paramsrv.Owner.
func (m *Managed) ParameterNames() []string { return params.Names() }

// Parameter implements paramsrv.Owner: the value the next configure uses
// (while configured, the one the node uses).
func (m *Managed) Parameter(name string) (msgs.ParameterValue, bool) {
	p := m.Params()
	v, ok := p.Value(name)
	if !ok {
		return msgs.ParameterValue{}, false
	}
	switch x := v.(type) {
	case bool:
		return paramsrv.Bool(x), true
	case int64:
		return paramsrv.Integer(x), true
	case float64:
		return paramsrv.Double(x), true
	case string:
		return paramsrv.String(x), true
	case []float64:
		return paramsrv.DoubleArray(x), true
	}
	return msgs.ParameterValue{}, false
}

// Describe implements paramsrv.Owner: the parameter's documentation, when
// it may change, and its range (params.Describe).
func (m *Managed) Describe(name string) (msgs.ParameterDescriptor, bool) {
	return params.Describe(name)
}

// SetParameters implements paramsrv.Owner: all of ps or none. While the
// node is configured only the live parameters (LiveParams) change, from
// the next chunk; the others are refused with the transitions that can
// change them. While unconfigured, any parameter but the read-only ones
// changes, for the next configure.
func (m *Managed) SetParameters(ctx context.Context, ps []msgs.Parameter) error {
	if !m.mu.TryLock() {
		return errTransitioning
	}
	defer m.mu.Unlock()
	q := m.Params()
	var reload []string
	for _, prm := range ps {
		if err := q.SetParameter(prm); err != nil {
			return err
		}
		if !params.IsLive(prm.Name) {
			reload = append(reload, prm.Name)
		}
	}
	if err := q.Validate(); err != nil {
		return err
	}
	if q.Topics != m.cfg.Params.Topics || q.QoS != m.cfg.Params.QoS || !slices.Equal(q.QoSOverrides, m.cfg.Params.QoSOverrides) {
		return errors.New("node: topics and their params.QoS are fixed when the node starts (restart the node to change them)")
	}
	if m.node != nil {
		if len(reload) > 0 {
			return fmt.Errorf("%s cannot change while the node is configured: deactivate, cleanup, set it, then configure (live: %s)",
				strings.Join(reload, ", "), strings.Join(params.LiveParams(), ", "))
		}
		if err := m.node.UpdateLive(q); err != nil {
			return err
		}
	}
	m.pmu.Lock()
	m.p = q
	m.pmu.Unlock()
	return nil
}
