//go:build rclgo

package rosnode

/*
#cgo LDFLAGS: -ldl -lrmw -lrcutils

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <rcutils/allocator.h>
#include <rmw/error_handling.h>
#include <rmw/rmw.h>
#include <rmw/serialized_message.h>
#include <rosidl_runtime_c/message_type_support_struct.h>
#include <rosidl_runtime_c/service_type_support_struct.h>

typedef const void *(*fw_ts_fn)(void);
typedef void *(*fw_create_fn)(void);
typedef void (*fw_destroy_fn)(void *);

// fw_open opens a library by name for the symbols below; NULL and the
// loader's message on failure.
static void *fw_open(const char *name, const char **err) {
	void *lib = dlopen(name, RTLD_LAZY | RTLD_LOCAL);
	*err = lib ? NULL : dlerror();
	return lib;
}

static void *fw_sym(void *lib, const char *name, const char **err) {
	dlerror();
	void *s = dlsym(lib, name);
	*err = s ? NULL : dlerror();
	return s;
}

static const void *fw_call_ts(void *fn) { return ((fw_ts_fn)fn)(); }
static void *fw_create(void *fn) { return ((fw_create_fn)fn)(); }
static void fw_destroy(void *fn, void *p) { ((fw_destroy_fn)fn)(p); }

// fw_serialize serializes the C message msg to CDR; on success *out is a
// malloc'd copy of the bytes (the caller frees it).
static const char *fw_serialize(const void *msg, const void *ts, uint8_t **out, size_t *len) {
	rmw_serialized_message_t sm = rmw_get_zero_initialized_serialized_message();
	rcutils_allocator_t a = rcutils_get_default_allocator();
	if (rmw_serialized_message_init(&sm, 0, &a) != RMW_RET_OK) {
		rmw_reset_error();
		return "rmw_serialized_message_init failed";
	}
	const char *err = NULL;
	if (rmw_serialize(msg, (const rosidl_message_type_support_t *)ts, &sm) != RMW_RET_OK) {
		err = "rmw_serialize failed";
		rmw_reset_error();
	} else {
		*len = sm.buffer_length;
		*out = malloc(sm.buffer_length ? sm.buffer_length : 1);
		if (*out == NULL) {
			err = "out of memory";
		} else {
			memcpy(*out, sm.buffer, sm.buffer_length);
		}
	}
	if (rmw_serialized_message_fini(&sm) != RMW_RET_OK) {
		rmw_reset_error();
	}
	return err;
}

// fw_deserialize fills the C message msg from CDR bytes.
static const char *fw_deserialize(uint8_t *data, size_t len, const void *ts, void *msg) {
	rmw_serialized_message_t sm = rmw_get_zero_initialized_serialized_message();
	sm.buffer = data;
	sm.buffer_length = len;
	sm.buffer_capacity = len;
	sm.allocator = rcutils_get_default_allocator();
	if (rmw_deserialize(&sm, (const rosidl_message_type_support_t *)ts, msg) != RMW_RET_OK) {
		rmw_reset_error();
		return "rmw_deserialize failed";
	}
	return NULL;
}
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/tiiuae/rclgo/pkg/rclgo"
	"github.com/tiiuae/rclgo/pkg/rclgo/types"

	"github.com/fastwam/actionexpert/node"
)

// Serve implements node.ServiceServer: it creates the service name of
// type srvType ("pkg/srv/Name") whose requests reach h as CDR bytes and
// whose responses are h's CDR bytes. The C message of each request and
// response exists only to cross rcl: rmw_serialize and rmw_deserialize
// move it to and from the bytes, with the type support loaded by name, so
// no generated Go bindings are needed. h runs on the spinning goroutine.
func (t *Transport) Serve(name, srvType string, h node.ServiceHandler) error {
	ts, err := t.serviceTypeSupport(srvType)
	if err != nil {
		return err
	}
	_, err = t.node.NewService(name, ts, nil, func(_ *rclgo.ServiceInfo, req types.Message, send rclgo.ServiceResponseSender) {
		in := req.(*rawMessage)
		if in.err != nil {
			t.log.Warnf("service %s: request: %v", name, in.err)
			return // no response: the client times out, as for a request rcl cannot take
		}
		out, err := h(in.data)
		if err != nil {
			t.log.Warnf("service %s: %v", name, err)
			return
		}
		resp := &rawMessage{ts: ts.resp, data: out}
		if err := send.SendResponse(resp); err != nil {
			t.log.Warnf("service %s: send response: %v", name, err)
		}
		if resp.err != nil {
			t.log.Warnf("service %s: response: %v", name, resp.err)
		}
	})
	if err != nil {
		return fmt.Errorf("rosnode: service %s [%s]: %w", name, srvType, err)
	}
	return nil
}

// rawServiceTypeSupport is an rclgo ServiceTypeSupport whose request and
// response cross as CDR bytes.
type rawServiceTypeSupport struct {
	ts        unsafe.Pointer // *rosidl_service_type_support_t
	req, resp *rawTypeSupport
}

func (s *rawServiceTypeSupport) Request() types.MessageTypeSupport  { return s.req }
func (s *rawServiceTypeSupport) Response() types.MessageTypeSupport { return s.resp }
func (s *rawServiceTypeSupport) TypeSupport() unsafe.Pointer        { return s.ts }

// rawTypeSupport is the MessageTypeSupport of one request or response.
type rawTypeSupport struct {
	name            string         // e.g. lifecycle_msgs/srv/ChangeState_Request
	ts              unsafe.Pointer // *rosidl_message_type_support_t
	create, destroy unsafe.Pointer // <pkg>__srv__<Msg>__create / __destroy
}

// rawMessage holds one request or response as CDR bytes, with the error
// of its conversion from or to C, if any.
type rawMessage struct {
	ts   *rawTypeSupport
	data []byte
	err  error
}

func (m *rawMessage) CloneMsg() types.Message {
	return &rawMessage{ts: m.ts, data: append([]byte(nil), m.data...), err: m.err}
}
func (m *rawMessage) SetDefaults()                             { m.data, m.err = nil, nil }
func (m *rawMessage) GetTypeSupport() types.MessageTypeSupport { return m.ts }

func (s *rawTypeSupport) New() types.Message             { return &rawMessage{ts: s} }
func (s *rawTypeSupport) TypeSupport() unsafe.Pointer    { return s.ts }
func (s *rawTypeSupport) PrepareMemory() unsafe.Pointer  { return C.fw_create(s.create) }
func (s *rawTypeSupport) ReleaseMemory(p unsafe.Pointer) { C.fw_destroy(s.destroy, p) }

// AsGoStruct serializes the C message src into dst's bytes.
func (s *rawTypeSupport) AsGoStruct(dst types.Message, src unsafe.Pointer) {
	m := dst.(*rawMessage)
	if src == nil {
		m.err = fmt.Errorf("%s: no memory for the C message", s.name)
		return
	}
	var out *C.uint8_t
	var n C.size_t
	if e := C.fw_serialize(src, s.ts, &out, &n); e != nil {
		m.err = fmt.Errorf("%s: %s", s.name, C.GoString(e))
		return
	}
	m.data = C.GoBytes(unsafe.Pointer(out), C.int(n))
	C.free(unsafe.Pointer(out))
}

// AsCStruct fills the C message dst from src's bytes.
func (s *rawTypeSupport) AsCStruct(dst unsafe.Pointer, src types.Message) {
	m := src.(*rawMessage)
	if dst == nil {
		m.err = fmt.Errorf("%s: no memory for the C message", s.name)
		return
	}
	if len(m.data) == 0 {
		m.err = fmt.Errorf("%s: empty CDR message", s.name)
		return
	}
	buf := C.CBytes(m.data)
	defer C.free(buf)
	if e := C.fw_deserialize((*C.uint8_t)(buf), C.size_t(len(m.data)), s.ts, dst); e != nil {
		m.err = fmt.Errorf("%s: %s", s.name, C.GoString(e))
	}
}

// serviceTypeSupport loads (once) the C type supports of the service
// srvType and of its request and response messages, and the functions
// that create and destroy their C messages. The libraries stay loaded, as
// rclgo's message type supports do.
func (t *Transport) serviceTypeSupport(srvType string) (*rawServiceTypeSupport, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.services[srvType]; ok {
		return s, nil
	}
	pkg, srv, ok := strings.Cut(srvType, "/srv/")
	if !ok || pkg == "" || srv == "" || strings.Contains(srv, "/") {
		return nil, fmt.Errorf("rosnode: service type %q is not of the form package/srv/Type", srvType)
	}
	tsLib, err := openLib("lib" + pkg + "__rosidl_typesupport_c.so")
	if err != nil {
		return nil, fmt.Errorf("rosnode: type support of %s (is %s installed and sourced?): %w", srvType, pkg, err)
	}
	genLib, err := openLib("lib" + pkg + "__rosidl_generator_c.so")
	if err != nil {
		return nil, fmt.Errorf("rosnode: C messages of %s (is %s installed and sourced?): %w", srvType, pkg, err)
	}
	get := func(lib unsafe.Pointer, sym string) (unsafe.Pointer, error) {
		cs := C.CString(sym)
		defer C.free(unsafe.Pointer(cs))
		var e *C.char
		p := C.fw_sym(lib, cs, &e)
		if p == nil {
			return nil, fmt.Errorf("rosnode: %s: %s has no symbol %s: %s", srvType, pkg, sym, C.GoString(e))
		}
		return p, nil
	}
	s := &rawServiceTypeSupport{}
	fn, err := get(tsLib, "rosidl_typesupport_c__get_service_type_support_handle__"+pkg+"__srv__"+srv)
	if err != nil {
		return nil, err
	}
	s.ts = unsafe.Pointer(C.fw_call_ts(fn))
	for _, part := range []struct {
		suffix string
		dst    **rawTypeSupport
	}{{"_Request", &s.req}, {"_Response", &s.resp}} {
		msg := srv + part.suffix
		r := &rawTypeSupport{name: pkg + "/srv/" + msg}
		if fn, err = get(tsLib, "rosidl_typesupport_c__get_message_type_support_handle__"+pkg+"__srv__"+msg); err != nil {
			return nil, err
		}
		r.ts = unsafe.Pointer(C.fw_call_ts(fn))
		if r.create, err = get(genLib, pkg+"__srv__"+msg+"__create"); err != nil {
			return nil, err
		}
		if r.destroy, err = get(genLib, pkg+"__srv__"+msg+"__destroy"); err != nil {
			return nil, err
		}
		*part.dst = r
	}
	if s.ts == nil || s.req.ts == nil || s.resp.ts == nil {
		return nil, fmt.Errorf("rosnode: type support of %s is missing from %s", srvType, pkg)
	}
	t.services[srvType] = s
	return s, nil
}

func openLib(name string) (unsafe.Pointer, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var e *C.char
	lib := C.fw_open(cs, &e)
	if lib == nil {
		return nil, fmt.Errorf("dlopen %s: %s", name, C.GoString(e))
	}
	return lib, nil
}
