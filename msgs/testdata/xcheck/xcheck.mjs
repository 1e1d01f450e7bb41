// Independent cross-check of the Go CDR codec (package msgs) and rosbag2 MCAP
// writer (package bag), built on Foxglove's TypeScript implementations.
//
//   node xcheck.mjs golden <outdir>   write <outdir>/<sample>.cdr for every sample below
//   node xcheck.mjs readbag <bagdir>  print, as JSON, every message of the bag's .mcap files
//
// The samples below hold the same values as the Go fixture in
// msgs/golden_test.go; the Go tests compare their encoding byte for byte with
// the files this script writes. Definitions are read from the .msg files of
// package msgs (msg/ and deps/), not from the Go code.

import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "@foxglove/rosmsg";
import { MessageReader, MessageWriter } from "@foxglove/rosmsg2-serialization";
import { McapIndexedReader } from "@mcap/core";

const here = path.dirname(fileURLToPath(import.meta.url));
const msgsDir = path.resolve(here, "..", "..");
const PKG = "fastwam_action_expert";
const SEPARATOR = "=".repeat(80);

// --- definitions from the .msg files -------------------------------------

function msgFiles() {
  const files = new Map(); // "pkg/Type" -> text
  for (const f of fs.readdirSync(path.join(msgsDir, "msg"))) {
    if (f.endsWith(".msg")) {
      files.set(`${PKG}/${f.slice(0, -4)}`, fs.readFileSync(path.join(msgsDir, "msg", f), "utf8"));
    }
  }
  const deps = path.join(msgsDir, "deps");
  for (const pkg of fs.readdirSync(deps)) {
    const dir = path.join(deps, pkg, "msg");
    if (!fs.existsSync(dir)) continue;
    for (const f of fs.readdirSync(dir)) {
      if (f.endsWith(".msg")) {
        files.set(`${pkg}/${f.slice(0, -4)}`, fs.readFileSync(path.join(dir, f), "utf8"));
      }
    }
  }
  // Services (deps/<pkg>/srv/<Srv>.srv): each is split at its "---" line into
  // the messages <Srv>_Request and <Srv>_Response, as rosidl does. A part
  // without fields gets rosidl's one member of an empty structure, so its
  // bytes are those rmw puts on the wire.
  for (const pkg of fs.readdirSync(deps)) {
    const dir = path.join(deps, pkg, "srv");
    if (!fs.existsSync(dir)) continue;
    for (const f of fs.readdirSync(dir)) {
      if (!f.endsWith(".srv")) continue;
      const lines = fs.readFileSync(path.join(dir, f), "utf8").split("\n");
      const cut = lines.findIndex((l) => l.trim() === "---");
      if (cut < 0) throw new Error(`${pkg}/srv/${f} has no "---" line`);
      const parts = [lines.slice(0, cut).join("\n"), lines.slice(cut + 1).join("\n")];
      ["Request", "Response"].forEach((kind, i) => {
        let text = parts[i];
        const hasField = text.split("\n").some((l) => l.replace(/#.*/, "").trim() !== "");
        if (!hasField) text = "uint8 structure_needs_at_least_one_member\n";
        files.set(`${pkg}/${f.slice(0, -4)}_${kind}`, text);
      });
    }
  }
  return files;
}

const PRIMITIVES = new Set(["bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16",
  "uint16", "int32", "uint32", "int64", "uint64", "string", "wstring"]);

// fieldTypes returns the complex field types of a .msg text as "pkg/Type".
function fieldTypes(text, pkg) {
  const types = [];
  for (const raw of text.split("\n")) {
    const line = raw.replace(/#.*/, "").trim();
    if (line === "") continue;
    const type = line.split(/\s+/)[0].replace(/\[.*\]$/, "").replace(/<=\d+$/, "");
    if (PRIMITIVES.has(type)) continue;
    types.push(type.includes("/") ? type.replace("/msg/", "/") : `${pkg}/${type}`);
  }
  return types;
}

// definitionFor returns the parsed definition of root ("pkg/Type"): its text
// followed by one section per transitive dependency.
function definitionFor(files, root) {
  const text = files.get(root);
  if (text === undefined) throw new Error(`no .msg file for ${root}`);
  const deps = [];
  const pending = fieldTypes(text, root.split("/")[0]);
  while (pending.length > 0) {
    const dep = pending.shift();
    if (dep === root || deps.includes(dep)) continue;
    const body = files.get(dep);
    if (body === undefined) throw new Error(`no .msg file for ${dep} (needed by ${root})`);
    deps.push(dep);
    pending.push(...fieldTypes(body, dep.split("/")[0]));
  }
  const full = text + deps.map((d) => `\n${SEPARATOR}\nMSG: ${d}\n${files.get(d)}`).join("");
  return parse(full, { ros2: true });
}

// --- samples (same values as the Go fixture) ------------------------------

function f32Bytes(values) {
  return new Uint8Array(new Float32Array(values).buffer);
}

function u16Bytes(values) {
  const out = new Uint8Array(values.length * 2);
  const view = new DataView(out.buffer);
  values.forEach((v, i) => view.setUint16(2 * i, v, true));
  return out;
}

function range(n, f) {
  return Array.from({ length: n }, (_, i) => f(i));
}

const F32_MAX = 3.4028234663852886e38;
const F32_MIN_SUBNORMAL = 1.401298464324817e-45;

const statusWarn = {
  level: 1,
  name: "fastwam_action_expert: pipeline",
  message: "stale input",
  hardware_id: "htp0",
  values: [
    { key: "chunks_out", value: "12" },
    { key: "dropped", value: "" },
  ],
};

export const samples = [
  ["time", "builtin_interfaces/Time", { sec: -1234567, nanosec: 999999999 }],
  ["header", "std_msgs/Header", { stamp: { sec: 1700000000, nanosec: 123456789 }, frame_id: "camera_link" }],
  ["header_empty", "std_msgs/Header", { stamp: { sec: 0, nanosec: 0 }, frame_id: "" }],
  ["tensor_f32", `${PKG}/Tensor`, {
    shape: [2, 3], dtype: 0, data: f32Bytes([1.5, -2.25, 0, -0, F32_MAX, F32_MIN_SUBNORMAL]),
  }],
  ["tensor_f16", `${PKG}/Tensor`, { shape: [3], dtype: 1, data: u16Bytes([0x3c00, 0xc000, 0x7bff]) }],
  ["tensor_empty", `${PKG}/Tensor`, { shape: [], dtype: 0, data: new Uint8Array(0) }],
  ["video_kv_cache", `${PKG}/VideoKVCache`, {
    header: { stamp: { sec: 100, nanosec: 200 }, frame_id: "world_model" },
    seq: (1n << 40n) + 7n,
    visible_video_tokens: 3,
    keys: { shape: [2, 1, 3, 4], dtype: 0, data: f32Bytes(range(24, (i) => (i - 12) * 0.25)) },
    values: { shape: [2, 1, 3, 4], dtype: 1, data: u16Bytes(range(24, (i) => 0x3c00 + 17 * i)) },
  }],
  ["kv_handoff", `${PKG}/KVHandoff`, {
    header: { stamp: { sec: 1700000003, nanosec: 77 }, frame_id: "world_model" },
    seq: (1n << 33n) + 9n,
    visible_video_tokens: 2,
    segment: "fastwam-kv.1234",
    slot: 3,
    generation: 0x100000002n,
    keys: { shape: [2, 1, 3, 4], dtype: 0, offset: 0n, length: 96n },
    values: { shape: [2, 1, 3, 4], dtype: 1, offset: 128n, length: 48n },
  }],
  ["text_context", `${PKG}/TextContext`, {
    header: { stamp: { sec: 1700000001, nanosec: 5 }, frame_id: "text" },
    seq: 42n,
    instruction: "put the bowl on the plate",
    context: { shape: [1, 3, 5], dtype: 0, data: f32Bytes(range(15, (i) => i * 0.125 - 1)) },
    attention_mask: [true, true, false],
  }],
  ["action_row", `${PKG}/ActionRow`, { values: [0.5, -0.25, 0.125] }],
  ["action_row_empty", `${PKG}/ActionRow`, { values: [] }],
  ["action_chunk", `${PKG}/ActionChunk`, {
    header: { stamp: { sec: 1700000002, nanosec: 999 }, frame_id: "base_link" },
    seq: 7n,
    kv_seq: 6n,
    context_seq: 5n,
    actions: range(2, (r) => ({ values: range(7, (c) => r * 0.5 + c * 0.0625 - 1) })),
    steps: 10,
    shift: 5,
    noise_seed: 0xfeedfacecafebeefn,
    backend: "cpu",
    denoise_ms: 12.5,
    receive_to_publish_ms: 20.25,
    input_age_ms: 3.125,
    dry_run: true,
    clipped: false,
    stale_input: true,
    dt: 0.05,
    inference_delay: 9,
    rtc_mode: "guided",
    rtc_prev_seq: 6n,
    rtc_shift: 8,
    rtc_delay: 9,
    rtc_horizon: 24,
    rtc_schedule: "exp",
    rtc_max_guidance: 5,
  }],
  ["action_chunk_empty", `${PKG}/ActionChunk`, {}],
  ["stamped_action", `${PKG}/StampedAction`, {
    header: { stamp: { sec: 1700000004, nanosec: 50000000 }, frame_id: "base_link" },
    values: [0.5, -0.25, 0.125, 0, -1.5, 2, 0.0625],
    chunk_seq: (1n << 33n) + 3n,
    row: 12,
    aggregated: 2,
    held: true,
  }],
  ["stamped_action_empty", `${PKG}/StampedAction`, {}],
  // The executor's control outputs and hold input (msgs/control.go).
  ["joint_trajectory", "trajectory_msgs/JointTrajectory", {
    header: { stamp: { sec: 1700000005, nanosec: 250000000 }, frame_id: "base_link" },
    joint_names: ["joint1", "joint2", "gripper"],
    points: [
      { positions: [0.5, -0.25, 1], velocities: [], accelerations: [], effort: [], time_from_start: { sec: 0, nanosec: 0 } },
      { positions: [0.625, -0.125, -1], velocities: [0.1], accelerations: [], effort: [2.5], time_from_start: { sec: 0, nanosec: 50000000 } },
      { positions: [], velocities: [], accelerations: [], effort: [], time_from_start: { sec: 1, nanosec: 600000000 } },
    ],
  }],
  ["joint_trajectory_empty", "trajectory_msgs/JointTrajectory", {}],
  ["float64_multi_array", "std_msgs/Float64MultiArray", {
    layout: { dim: [{ label: "action", size: 7, stride: 7 }], data_offset: 0 },
    data: [0.5, -0.25, 0.125, 0, -1.5, 2, 0.0625],
  }],
  ["float64_multi_array_empty", "std_msgs/Float64MultiArray", {}],
  ["twist_stamped", "geometry_msgs/TwistStamped", {
    header: { stamp: { sec: 1700000006, nanosec: 1 }, frame_id: "tool0" },
    twist: { linear: { x: 0.5, y: -0.25, z: 0.125 }, angular: { x: 0, y: -1.5, z: 2 } },
  }],
  ["float64", "std_msgs/Float64", { data: -0.75 }],
  ["bool_true", "std_msgs/Bool", { data: true }],
  ["key_value", "diagnostic_msgs/KeyValue", { key: "fps", value: "30.0" }],
  ["diagnostic_status", "diagnostic_msgs/DiagnosticStatus", statusWarn],
  ["diagnostic_array", "diagnostic_msgs/DiagnosticArray", {
    header: { stamp: { sec: 1700000003, nanosec: 0 }, frame_id: "" },
    status: [statusWarn, { level: 0, name: "backend", message: "ok", hardware_id: "", values: [] }],
  }],
  ["diagnostic_array_empty", "diagnostic_msgs/DiagnosticArray", {}],
  // The observation messages of the world-model side (msgs/sensor.go).
  ["image_rgb8", "sensor_msgs/Image", {
    header: { stamp: { sec: 1700000007, nanosec: 33000000 }, frame_id: "agentview_optical" },
    height: 2, width: 3, encoding: "rgb8", is_bigendian: 0, step: 10,
    data: new Uint8Array(range(20, (i) => (i * 37 + 5) % 256)),
  }],
  ["image_empty", "sensor_msgs/Image", {}],
  ["compressed_image", "sensor_msgs/CompressedImage", {
    header: { stamp: { sec: 1700000008, nanosec: 1 }, frame_id: "wrist" },
    format: "rgb8; jpeg compressed bgr8",
    data: new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 0, 16, 0x4a]),
  }],
  ["compressed_image_empty", "sensor_msgs/CompressedImage", {}],
  ["joint_state", "sensor_msgs/JointState", {
    header: { stamp: { sec: 1700000009, nanosec: 500 }, frame_id: "" },
    name: ["joint1", "joint2", "gripper_left"],
    position: [0.5, -1.25, 0.04], velocity: [], effort: [0.25, -3.5, 1],
  }],
  ["joint_state_empty", "sensor_msgs/JointState", {}],
  ["string", "std_msgs/String", { data: "put the bowl on the plate" }],
  ["string_empty", "std_msgs/String", {}],
  ...lifecycleAndParameterSamples(),
];

// --- lifecycle_msgs, rcl_interfaces, rosgraph_msgs (node/lifecycle, node/paramsrv)

function lifecycleAndParameterSamples() {
  const st = (id, label) => ({ id, label });
  const inactive = st(2, "inactive");
  const configuring = st(10, "configuring");
  const desc = { transition: st(1, "configure"), start_state: st(1, "unconfigured"), goal_state: configuring };
  const emptyValue = {
    type: 0, bool_value: false, integer_value: 0n, double_value: 0, string_value: "",
    byte_array_value: new Uint8Array(0), bool_array_value: [], integer_array_value: [],
    double_array_value: [], string_array_value: [],
  };
  const v = (fields) => ({ ...emptyValue, ...fields });
  const allKinds = v({
    type: 8, bool_value: true, integer_value: -(1n << 40n) - 3n, double_value: -0.375, string_value: "cpu",
    byte_array_value: new Uint8Array([0, 7, 255]), bool_array_value: [true, false, true],
    integer_array_value: [1n, -2n, (1n << 62n) + 1n], double_array_value: [0.5, -1e300, 3],
    string_array_value: ["a", "", "expert.steps"],
  });
  const params = [
    { name: "steps", value: v({ type: 2, integer_value: 10n }) },
    { name: "shift", value: v({ type: 3, double_value: 5 }) },
    { name: "dry_run", value: v({ type: 1, bool_value: true }) },
    { name: "backend", value: v({ type: 4, string_value: "htp" }) },
    { name: "clip.low", value: v({ type: 8, double_array_value: [-1, -0.5] }) },
  ];
  const descriptor = {
    name: "steps", type: 2, description: "denoise steps per chunk", additional_constraints: "",
    read_only: false, dynamic_typing: false, floating_point_range: [],
    integer_range: [{ from_value: 1n, to_value: 100n, step: 1n }],
  };
  const descriptorRO = {
    name: "htp.context_binary", type: 4, description: "the QNN context binary",
    additional_constraints: "change it with cleanup, then configure", read_only: true, dynamic_typing: false,
    floating_point_range: [], integer_range: [],
  };
  const descriptorF = {
    name: "shift", type: 3, description: "", additional_constraints: "", read_only: false,
    dynamic_typing: true, floating_point_range: [{ from_value: 0.5, to_value: 20, step: 0 }], integer_range: [],
  };
  return [
    ["lc_state", "lifecycle_msgs/State", inactive],
    ["lc_transition", "lifecycle_msgs/Transition", st(3, "activate")],
    ["lc_transition_description", "lifecycle_msgs/TransitionDescription", desc],
    ["lc_transition_event", "lifecycle_msgs/TransitionEvent", {
      timestamp: 1700000004000000123n, transition: st(10, "transition_success"),
      start_state: configuring, goal_state: inactive,
    }],
    ["lc_change_state_request", "lifecycle_msgs/ChangeState_Request", { transition: st(0, "shutdown") }],
    ["lc_change_state_response", "lifecycle_msgs/ChangeState_Response", { success: true }],
    ["lc_get_state_request", "lifecycle_msgs/GetState_Request", { structure_needs_at_least_one_member: 0 }],
    ["lc_get_state_response", "lifecycle_msgs/GetState_Response", { current_state: st(15, "errorprocessing") }],
    ["lc_get_available_states_request", "lifecycle_msgs/GetAvailableStates_Request",
      { structure_needs_at_least_one_member: 0 }],
    ["lc_get_available_states_response", "lifecycle_msgs/GetAvailableStates_Response", {
      available_states: [st(0, "unknown"), st(1, "unconfigured"), inactive],
    }],
    ["lc_get_available_transitions_request", "lifecycle_msgs/GetAvailableTransitions_Request",
      { structure_needs_at_least_one_member: 0 }],
    ["lc_get_available_transitions_response", "lifecycle_msgs/GetAvailableTransitions_Response", {
      available_transitions: [desc, {
        transition: st(5, "shutdown"), start_state: st(1, "unconfigured"), goal_state: st(12, "shuttingdown"),
      }],
    }],
    ["lc_get_available_transitions_response_empty", "lifecycle_msgs/GetAvailableTransitions_Response",
      { available_transitions: [] }],
    ["rcl_parameter_value", "rcl_interfaces/ParameterValue", allKinds],
    ["rcl_parameter_value_empty", "rcl_interfaces/ParameterValue", emptyValue],
    ["rcl_parameter", "rcl_interfaces/Parameter", { name: "expert.steps", value: allKinds }],
    ["rcl_floating_point_range", "rcl_interfaces/FloatingPointRange", { from_value: -1.5, to_value: 2.25, step: 0.25 }],
    ["rcl_integer_range", "rcl_interfaces/IntegerRange", { from_value: -5n, to_value: 1n << 40n, step: 3n }],
    ["rcl_parameter_descriptor", "rcl_interfaces/ParameterDescriptor", descriptor],
    ["rcl_parameter_descriptor_float", "rcl_interfaces/ParameterDescriptor", descriptorF],
    ["rcl_set_parameters_result", "rcl_interfaces/SetParametersResult", {
      successful: false, reason: "htp.context_binary: change it with cleanup, then configure",
    }],
    ["rcl_list_parameters_result", "rcl_interfaces/ListParametersResult", {
      names: ["steps", "clip.low", "clip.high"], prefixes: ["clip"],
    }],
    ["rcl_parameter_event", "rcl_interfaces/ParameterEvent", {
      stamp: { sec: 1700000005, nanosec: 42 }, node: "/fastwam/action_expert",
      new_parameters: [], changed_parameters: params.slice(0, 2), deleted_parameters: [],
    }],
    ["rcl_list_parameters_request", "rcl_interfaces/ListParameters_Request", { prefixes: ["clip", "htp"], depth: 1n }],
    ["rcl_list_parameters_response", "rcl_interfaces/ListParameters_Response", {
      result: { names: ["clip.high", "clip.low"], prefixes: ["clip"] },
    }],
    ["rcl_get_parameters_request", "rcl_interfaces/GetParameters_Request", { names: ["steps", "nope"] }],
    ["rcl_get_parameters_response", "rcl_interfaces/GetParameters_Response", { values: params.map((p) => p.value) }],
    ["rcl_get_parameter_types_request", "rcl_interfaces/GetParameterTypes_Request", { names: ["shift"] }],
    ["rcl_get_parameter_types_response", "rcl_interfaces/GetParameterTypes_Response", {
      types: new Uint8Array([2, 3, 1, 4, 8, 0]),
    }],
    ["rcl_set_parameters_request", "rcl_interfaces/SetParameters_Request", { parameters: params }],
    ["rcl_set_parameters_response", "rcl_interfaces/SetParameters_Response", {
      results: [{ successful: true, reason: "" }, { successful: false, reason: "read-only" }],
    }],
    ["rcl_set_parameters_atomically_request", "rcl_interfaces/SetParametersAtomically_Request",
      { parameters: params.slice(3) }],
    ["rcl_set_parameters_atomically_response", "rcl_interfaces/SetParametersAtomically_Response", {
      result: { successful: true, reason: "" },
    }],
    ["rcl_describe_parameters_request", "rcl_interfaces/DescribeParameters_Request", { names: ["steps", "shift"] }],
    ["rcl_describe_parameters_response", "rcl_interfaces/DescribeParameters_Response", {
      descriptors: [descriptor, descriptorRO, descriptorF],
    }],
    ["rosgraph_clock", "rosgraph_msgs/Clock", { clock: { sec: 12, nanosec: 500000000 } }],
  ];
}

function writeGolden(outDir) {
  const files = msgFiles();
  fs.mkdirSync(outDir, { recursive: true });
  for (const [name, type, value] of samples) {
    const writer = new MessageWriter(definitionFor(files, type));
    const bytes = writer.writeMessage(value);
    // Decode what was written as a self-check of the sample.
    new MessageReader(definitionFor(files, type)).readMessage(bytes);
    fs.writeFileSync(path.join(outDir, `${name}.cdr`), bytes);
  }
}

// --- bag reading ------------------------------------------------------------

class FileReadable {
  constructor(fd) {
    this.fd = fd;
  }
  async size() {
    return BigInt(fs.fstatSync(this.fd).size);
  }
  async read(offset, size) {
    const buf = new Uint8Array(Number(size));
    let done = 0;
    while (done < buf.length) {
      const n = fs.readSync(this.fd, buf, done, buf.length - done, Number(offset) + done);
      if (n === 0) throw new Error(`short read at ${offset}`);
      done += n;
    }
    return buf;
  }
}

// toJSON turns decoded values into JSON-friendly ones: bigint -> decimal
// string, Uint8Array -> base64 string, other typed arrays -> arrays.
function toJSON(value) {
  if (typeof value === "bigint") return value.toString();
  if (value instanceof Uint8Array) return Buffer.from(value).toString("base64");
  if (ArrayBuffer.isView(value)) return Array.from(value, toJSON);
  if (Array.isArray(value)) return value.map(toJSON);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toJSON(v)]));
  }
  return value;
}

async function readBag(bagDir) {
  const names = fs.readdirSync(bagDir).filter((f) => f.endsWith(".mcap")).sort();
  if (names.length === 0) throw new Error(`no .mcap file in ${bagDir}`);
  const decoder = new TextDecoder();
  const out = { files: [] };
  for (const name of names) {
    const fd = fs.openSync(path.join(bagDir, name), "r");
    try {
      const reader = await McapIndexedReader.Initialize({ readable: new FileReadable(fd) });
      const file = {
        name,
        profile: reader.header.profile,
        library: reader.header.library,
        metadata: [],
        channels: [],
        messages: [],
      };
      for await (const m of reader.readMetadata()) {
        file.metadata.push({ name: m.name, metadata: Object.fromEntries(m.metadata) });
      }
      const readers = new Map();
      for (const ch of [...reader.channelsById.values()].sort((a, b) => a.id - b.id)) {
        const schema = reader.schemasById.get(ch.schemaId);
        file.channels.push({
          topic: ch.topic,
          messageEncoding: ch.messageEncoding,
          metadata: Object.fromEntries(ch.metadata),
          schemaName: schema.name,
          schemaEncoding: schema.encoding,
          schema: decoder.decode(schema.data),
        });
        if (schema.encoding !== "ros2msg" || ch.messageEncoding !== "cdr") {
          throw new Error(`channel ${ch.topic}: schema ${schema.encoding}, messages ${ch.messageEncoding}`);
        }
        readers.set(ch.id, new MessageReader(parse(decoder.decode(schema.data), { ros2: true })));
      }
      for await (const msg of reader.readMessages({ validateCrcs: true })) {
        const ch = reader.channelsById.get(msg.channelId);
        file.messages.push({
          topic: ch.topic,
          logTime: msg.logTime.toString(),
          publishTime: msg.publishTime.toString(),
          sequence: msg.sequence,
          value: toJSON(readers.get(msg.channelId).readMessage(msg.data)),
        });
      }
      out.files.push(file);
    } finally {
      fs.closeSync(fd);
    }
  }
  process.stdout.write(JSON.stringify(out));
}

const [mode, arg] = process.argv.slice(2);
if (mode === "golden" && arg) {
  writeGolden(path.resolve(arg));
} else if (mode === "readbag" && arg) {
  await readBag(path.resolve(arg));
} else {
  process.stderr.write("usage: node xcheck.mjs golden <outdir> | readbag <bagdir>\n");
  process.exit(2);
}
