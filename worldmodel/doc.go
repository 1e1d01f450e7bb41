// Package worldmodel is the host-side front end of Fast-WAM's world model:
// what turns a robot's camera frames, proprio state and instruction into
// the video K/V cache and the context the action expert reads, as
// ../shared/spec/world-model.md specifies them.
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
//     rewritten as 2-D ones (each 3×3 as nine shifted sgemms), its weights read by the
//     checkpoint's names (VAEEncoder, LoadVAEWeights);
//   - the video DiT prefill at t = 0 (§5): the latent and the context to
//     every layer's video K and V, written straight into the caller's F32 or
//     F16 buffers, the time modulation folded at load, the 3-D RoPE, the
//     last layer trimmed to its K and V (DiT, DiTConfig, LoadDiTWeights, the
//     DiT weight file contract of docs/world-model.md);
//   - the whole world model (§0): camera images, proprio state and
//     instruction to K/V, context and mask, with per-stage times (Model,
//     LoadModel).
//
// The block kernels are internal/kernels, shared with the action expert
// (expert/cpu); products go through the sgemm cpu.PickGemm chooses. Every
// input is hostile: a bad size, length or value is refused with an error
// naming it, before anything is computed. See docs/world-model.md.
package worldmodel
