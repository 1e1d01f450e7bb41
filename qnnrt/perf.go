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

// VoteOutcome is what became of one part of a performance vote.
type VoteOutcome int

// The outcomes of a part of the vote.
const (
	// VoteNotSent: the part was not sent (no vote was cast, or the mode's
	// vote has no such part).
	VoteNotSent VoteOutcome = iota
	// VoteApplied: the backend accepted the part.
	VoteApplied
	// VoteFailed: the backend refused the part (a warning says why).
	VoteFailed
	// VoteSkipped: the part was left out because it is off
	// (SessionOptions.RPCVote false, the default).
	VoteSkipped
)

// String returns "not sent", "applied", "failed" or "off".
func (o VoteOutcome) String() string {
	switch o {
	case VoteNotSent:
		return "not sent"
	case VoteApplied:
		return "applied"
	case VoteFailed:
		return "failed"
	case VoteSkipped:
		return "off"
	}
	return fmt.Sprintf("VoteOutcome(%d)", int(o))
}

// PerfStatus says what became of a session's performance vote. The vote
// is sent in two setPowerConfig calls: the DCVS part (power mode, voltage
// corners, sleep latency) and the RPC part (control latency, polling time).
type PerfStatus struct {
	Mode PerfMode
	DCVS VoteOutcome
	RPC  VoteOutcome
	// Reason says why no vote could be cast at all (no device, no perf
	// infrastructure), or "" when the parts were sent.
	Reason string
}

// String describes the status, e.g. "burst (DCVS applied, RPC failed)".
func (p PerfStatus) String() string {
	if p.Mode == PerfDefault {
		return p.Mode.String()
	}
	if p.Reason != "" {
		return fmt.Sprintf("%s (not applied: %s)", p.Mode, p.Reason)
	}
	return fmt.Sprintf("%s (DCVS %s, RPC %s)", p.Mode, p.DCVS, p.RPC)
}

// PerfStatus returns what became of the session's performance vote.
func (s *Session) PerfStatus() PerfStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// votePerf creates the power config id and casts the session's vote: the
// DCVS part and the RPC part in separate setPowerConfig calls, each
// failure a warning naming the part; the RPC part is not sent when the
// DCVS part failed. A session without a device or perf infrastructure
// gets no vote and a warning naming the cause. A broken infrastructure
// (wrong type, missing functions) and a failing createPowerConfigId are
// errors.
func (s *Session) votePerf() error {
	m := s.opts.PerfMode
	s.status = PerfStatus{Mode: m}
	if m == PerfDefault {
		return nil
	}
	if m < PerfDefault || m > PerfPowerSaver {
		return fmt.Errorf("qnnrt: unknown performance mode %d", int(m))
	}
	l := s.lib
	notApplied := func(key, reason string) error {
		s.status.Reason = reason
		l.warnOnce(key, "qnnrt: performance mode %s not applied: %s", m, reason)
		return nil
	}
	if s.device == 0 {
		return notApplied("perf-no-device", s.noDev)
	}
	fn := l.core[fnDeviceGetInfrastructure]
	if fn == 0 {
		return notApplied("perf-no-infrastructure",
			fmt.Sprintf("deviceCreate succeeded but provider %s has no deviceGetInfrastructure (its table entry %d is NULL), so there is no perf infrastructure to vote through",
				l.provider, fnDeviceGetInfrastructure))
	}
	var infra unsafe.Pointer
	if err := l.call("deviceGetInfrastructure", fn, uintptr(unsafe.Pointer(&infra))); err != nil {
		if c, _ := Code(err); c == codeNotSupported {
			return notApplied("perf-infrastructure-unsupported", fmt.Sprintf("deviceCreate succeeded but %v", err))
		}
		return fmt.Errorf("%w (performance mode %s)", err, m)
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
	if err := l.call("createPowerConfigId", p.CreatePowerConfigID, 0, 0, uintptr(unsafe.Pointer(&id))); err != nil {
		return fmt.Errorf("%w (performance mode %s)", err, m)
	}
	s.perf = perfState{infra: p, id: id, active: true}
	v := voteFor(m)
	rpc := rpcConfigs(v)
	if err := s.setPower(s.dcvsConfigs(v)); err != nil {
		s.status.DCVS = VoteFailed
		also := ""
		if len(rpc) > 0 && s.opts.RPCVote {
			also = "; the RPC part is not sent after it (the perf transport already refuses votes)"
		}
		l.warnOnce("perf-dcvs", "qnnrt: performance mode %s: the DCVS part of the vote (power mode, voltage corners, sleep latency) was not applied: %v%s", m, err, also)
	} else {
		s.status.DCVS = VoteApplied
	}
	switch {
	case len(rpc) == 0:
	case !s.opts.RPCVote:
		s.status.RPC = VoteSkipped
	case s.status.DCVS == VoteFailed:
		// Qualcomm's x86 HTP emulator refuses the DCVS part (13003) and
		// then crashes inside setPowerConfig on the RPC part: a transport
		// that refused one vote is not sent another.
	default:
		if err := s.setPower(rpc); err != nil {
			s.status.RPC = VoteFailed
			l.warnOnce("perf-rpc", "qnnrt: performance mode %s: the RPC part of the vote (control latency %d us, polling time %d us) was not applied: %v",
				m, v.latency, v.polling, err)
		} else {
			s.status.RPC = VoteApplied
		}
	}
	return nil
}

// dcvsConfigs is the DCVS v3 part of v for the session's power config id.
func (s *Session) dcvsConfigs(v powerVote) []powerConfig {
	d := powerConfig{Option: powerOptDcvsV3}
	*d.dcvs() = v.dcvs
	d.dcvs().ContextID = s.perf.id
	return []powerConfig{d}
}

// rpcConfigs is the RPC part of v: control latency and polling time, when
// set.
func rpcConfigs(v powerVote) []powerConfig {
	var out []powerConfig
	if v.latency != 0 {
		pc := powerConfig{Option: powerOptRPCLatency}
		pc.Union[0] = v.latency
		out = append(out, pc)
	}
	if v.polling != 0 {
		pc := powerConfig{Option: powerOptRPCPolling}
		pc.Union[0] = v.polling
		out = append(out, pc)
	}
	return out
}

// setPower sends configs through one setPowerConfig call as a
// NULL-terminated array.
func (s *Session) setPower(configs []powerConfig) error {
	mem, err := allocC(4096)
	if err != nil {
		return err
	}
	defer mem.free()
	a := arena{mem: mem}
	list, err := a.alloc(8*(len(configs)+1), 8)
	if err != nil {
		return err
	}
	for i, pc := range configs {
		p, err := a.alloc(int(unsafe.Sizeof(powerConfig{})), 8)
		if err != nil {
			return err
		}
		*(*powerConfig)(p) = pc
		*(*unsafe.Pointer)(unsafe.Add(list, 8*i)) = p
	}
	return s.lib.call("setPowerConfig", s.perf.infra.SetPowerConfig, uintptr(s.perf.id), uintptr(list))
}

// releasePerf casts the down-vote (when the DCVS part of the vote was
// applied) and destroys the power config id.
func (s *Session) releasePerf() error {
	if !s.perf.active {
		return nil
	}
	var errs []error
	if s.status.DCVS == VoteApplied {
		if err := s.setPower(s.dcvsConfigs(downVote())); err != nil {
			errs = append(errs, fmt.Errorf("%w (down-vote on close)", err))
		}
	}
	if err := s.lib.call("destroyPowerConfigId", s.perf.infra.DestroyPowerConfigID, uintptr(s.perf.id)); err != nil {
		errs = append(errs, err)
	}
	s.perf = perfState{}
	return errors.Join(errs...)
}
