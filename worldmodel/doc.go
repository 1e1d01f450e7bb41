// Package worldmodel is the host-side front end of Fast-WAM's world model:
// what turns a robot's camera frames, proprio state and instruction into
// the inputs of the video DiT, as ../shared/spec/world-model.md §1–§4
// specifies them.
//
// It provides, so far:
//
//   - image preprocessing (§1): two u8 RGB camera images of any size to the
//     [224, 448, 3] u8 frame (Pillow's antialiased BILINEAR resize in its
//     integer arithmetic, the center crop, a per-camera 180° flip, the
//     camera order and the concatenation direction as parameters), then the
//     [1, 3, H, W] float32 tensor in [-1, 1] (Preprocessor, ImageTensor);
//   - the proprio path (§2): the 8 raw values (Quat2AxisAngle, State), their
//     min/max normalisation with the checkpoint's dataset_stats.json state
//     statistics in float32 (StateNormalizer), and the proprio token of the
//     Linear 8 → 4096 (ProprioToken);
//   - the context (§2.4, §3.3): 128 text rows and the proprio row as the
//     [1, 129, 4096] context, its mask all true (AssembleContext);
//   - the per-instruction text cache (§3.4): a strict safetensors file per
//     prompt, looked up by instruction (TextCache);
//   - the Wan2.2 VAE encoder at T = 1 (§4): the image tensor to the
//     normalised latent mean [48, H/16, W/16], its rank-5 convolutions
//     rewritten as rank-3 ones (im2col and sgemm), its weights read by the
//     checkpoint's names (VAEEncoder, LoadVAEWeights).
//
// The video DiT prefill and its weights come later; see
// docs/world-model.md. Every input is hostile: a bad size, length or value
// is refused with an error naming it, before anything is computed.
package worldmodel
