package qnnrt

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

// PerfMode is an HTP performance mode: the power vote a session holds while
// it is open.
type PerfMode int

// The performance modes.
const (
	// PerfDefault casts no vote: the DSP keeps its own clock policy.
	PerfDefault PerfMode = iota
	// PerfBurst votes the highest voltage corners with DCVS off, the
	// shortest sleep latency and RPC polling: lowest latency, most power.
	PerfBurst
	// PerfHighPerformance votes turbo corners with DCVS off.
	PerfHighPerformance
	// PerfBalanced votes nominal-plus corners with DCVS on.
	PerfBalanced
	// PerfPowerSaver votes low corners in power-saver mode with DCVS on.
	PerfPowerSaver
)

// String returns the mode's name as ParsePerfMode accepts it.
func (m PerfMode) String() string {
	switch m {
	case PerfDefault:
		return "default"
	case PerfBurst:
		return "burst"
	case PerfHighPerformance:
		return "high_performance"
	case PerfBalanced:
		return "balanced"
	case PerfPowerSaver:
		return "power_saver"
	}
	return fmt.Sprintf("PerfMode(%d)", int(m))
}

// ParsePerfMode parses "burst", "high_performance", "balanced",
// "power_saver" or "default" (case-insensitive, '-' accepted for '_'); the
// empty string is PerfDefault.
func ParsePerfMode(s string) (PerfMode, error) {
	t := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "-", "_")
	if t == "" {
		return PerfDefault, nil
	}
	var names []string
	for m := PerfDefault; m <= PerfPowerSaver; m++ {
		if t == m.String() {
			return m, nil
		}
		names = append(names, m.String())
	}
	return PerfDefault, fmt.Errorf("qnnrt: unknown performance mode %q; want one of %s", s, strings.Join(names, ", "))
}

// perfState is the session's power-config id and the perf-infrastructure
// functions that go with it.
type perfState struct {
	infra  htpPerfInfrastructure
	id     uint32
	active bool
}

// powerVote is one set of power configs for setPowerConfig.
type powerVote struct {
	dcvs    dcvsV3
	latency uint32 // RPC control latency in us, 0 = not set
	polling uint32 // RPC polling time in us, 0 = not set
}

// voteFor returns the vote of mode m (not PerfDefault).
func voteFor(m PerfMode) powerVote {
	on := func(mode, dcvs, sleep, corner uint32) dcvsV3 {
		return dcvsV3{
			SetDcvsEnable: 1, DcvsEnable: dcvs, PowerMode: mode,
			SetSleepLatency: 1, SleepLatency: sleep,
			SetBusParams: 1, BusVoltageCornerMin: corner, BusVoltageCornerTarget: corner, BusVoltageCornerMax: corner,
			SetCoreParams: 1, CoreVoltageCornerMin: corner, CoreVoltageCornerTgt: corner, CoreVoltageCornerMax: corner,
		}
	}
	switch m {
	case PerfBurst:
		return powerVote{dcvs: on(powerModePerformance, 0, 40, vcornerMax), latency: 100, polling: 9999}
	case PerfHighPerformance:
		return powerVote{dcvs: on(powerModePerformance, 0, 100, vcornerTurbo), latency: 100}
	case PerfBalanced:
		return powerVote{dcvs: on(powerModeAdjustUpDown, 1, 1000, vcornerNomPlus)}
	case PerfPowerSaver:
		return powerVote{dcvs: on(powerModePowerSaver, 1, 1000, vcornerSVS)}
	}
	return downVote()
}

// downVote is the vote cast when a session closes: power saver, DCVS on,
// low corners, a long sleep latency.
func downVote() powerVote {
	v := voteFor(PerfPowerSaver)
	v.dcvs.SleepLatency = 2000
	return v
}

// votePerf creates the power config id and casts the session's vote. A
// backend without device support or perf infrastructure (NOT_SUPPORTED)
// gets no vote and a warning; other failures are errors.
func (s *Session) votePerf() error {
	m := s.opts.PerfMode
	if m == PerfDefault {
		return nil
	}
	if m < PerfDefault || m > PerfPowerSaver {
		return fmt.Errorf("qnnrt: unknown performance mode %d", int(m))
	}
	l := s.lib
	fn := l.core[fnDeviceGetInfrastructure]
	if fn == 0 || s.device == 0 {
		l.warnOnce("perf-unsupported", "qnnrt: performance mode %s not applied: provider %s has no device support", m, l.provider)
		return nil
	}
	var infra unsafe.Pointer
	if ret := ccall(fn, uintptr(unsafe.Pointer(&infra))); ret != 0 {
		if errorCode(ret) == codeNotSupported {
			l.warnOnce("perf-unsupported", "qnnrt: performance mode %s not applied: %v", m, l.qnnError("deviceGetInfrastructure", ret))
			return nil
		}
		return l.qnnError("deviceGetInfrastructure", ret)
	}
	if infra == nil {
		return fmt.Errorf("qnnrt: performance mode %s: deviceGetInfrastructure returned no infrastructure", m)
	}
	hi := (*htpInfrastructure)(infra)
	if hi.InfraType != infraTypePerf {
		return fmt.Errorf("qnnrt: performance mode %s: infrastructure type %d, want PERF (0)", m, hi.InfraType)
	}
	p := hi.Perf
	if p.CreatePowerConfigID == 0 || p.DestroyPowerConfigID == 0 || p.SetPowerConfig == 0 {
		return fmt.Errorf("qnnrt: performance mode %s: the perf infrastructure lacks createPowerConfigId/destroyPowerConfigId/setPowerConfig", m)
	}
	var id uint32
	if ret := ccall(p.CreatePowerConfigID, 0, 0, uintptr(unsafe.Pointer(&id))); ret != 0 {
		return l.qnnError("createPowerConfigId", ret)
	}
	s.perf = perfState{infra: p, id: id, active: true}
	if err := s.setPower(voteFor(m)); err != nil {
		return fmt.Errorf("%w (performance mode %s)", err, m)
	}
	return nil
}

// setPower sends v through setPowerConfig as a NULL-terminated array.
func (s *Session) setPower(v powerVote) error {
	mem, err := allocC(4096)
	if err != nil {
		return err
	}
	defer mem.free()
	a := arena{mem: mem}
	list, err := a.alloc(4*8, 8)
	if err != nil {
		return err
	}
	n := 0
	add := func(pc powerConfig) error {
		p, err := a.alloc(int(unsafe.Sizeof(powerConfig{})), 8)
		if err != nil {
			return err
		}
		*(*powerConfig)(p) = pc
		*(*unsafe.Pointer)(unsafe.Add(list, 8*n)) = p
		n++
		return nil
	}
	d := powerConfig{Option: powerOptDcvsV3}
	*d.dcvs() = v.dcvs
	d.dcvs().ContextID = s.perf.id
	if err := add(d); err != nil {
		return err
	}
	if v.latency != 0 {
		pc := powerConfig{Option: powerOptRPCLatency}
		pc.Union[0] = v.latency
		if err := add(pc); err != nil {
			return err
		}
	}
	if v.polling != 0 {
		pc := powerConfig{Option: powerOptRPCPolling}
		pc.Union[0] = v.polling
		if err := add(pc); err != nil {
			return err
		}
	}
	if ret := ccall(s.perf.infra.SetPowerConfig, uintptr(s.perf.id), uintptr(list)); ret != 0 {
		return s.lib.qnnError("setPowerConfig", ret)
	}
	return nil
}

// releasePerf casts the down-vote and destroys the power config id.
func (s *Session) releasePerf() error {
	if !s.perf.active {
		return nil
	}
	var errs []error
	if err := s.setPower(downVote()); err != nil {
		errs = append(errs, fmt.Errorf("%w (down-vote on close)", err))
	}
	if ret := ccall(s.perf.infra.DestroyPowerConfigID, uintptr(s.perf.id)); ret != 0 {
		errs = append(errs, s.lib.qnnError("destroyPowerConfigId", ret))
	}
	s.perf = perfState{}
	return errors.Join(errs...)
}
