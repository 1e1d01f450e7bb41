#!/usr/bin/env python3
"""Tests of the graph set: the export, the linter, and the equivalences of docs/graphs.md.

Run: /usr/bin/python3 golden/export/test_export.py [-v]   (graphs/export_test.go runs it from go test)
Prints one FIGURE line per measured comparison (the Go test relays them).
"""

import io
import math
import os
import sys
import tempfile
import unittest

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, GOLDEN)
import export  # noqa: E402
import graphs  # noqa: E402
import lint  # noqa: E402
import onnx_eval  # noqa: E402
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402

torch.set_num_threads(1)


def figure(name, value):
    print(f"FIGURE {name}: {value}", flush=True)


def maxrel(a, b):
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    return float((a - b).abs().max() / b.abs().max())


# ----------------------------------------------------------------------------- tiny world model weights


TINY_WORLD = {"dim": 48, "num_heads": 2, "attn_head_dim": 24, "ffn_dim": 96, "num_layers": 5, "text_dim": 32,
              "freq_dim": 256, "z_dim": 4}


def random_world(cfg, seed=7):
    """Random video-DiT tensors in the §6.2 layout (no prefix), the §11-style randomisation."""
    g = torch.Generator().manual_seed(seed)
    D, Fw, T, f, z = cfg["dim"], cfg["ffn_dim"], cfg["text_dim"], cfg["freq_dim"], cfg["z_dim"]
    shapes = {"patch_embedding.weight": (D, z, 1, 2, 2), "patch_embedding.bias": (D,),
              "text_embedding.0.weight": (D, T), "text_embedding.0.bias": (D,),
              "text_embedding.2.weight": (D, D), "text_embedding.2.bias": (D,),
              "time_embedding.0.weight": (D, f), "time_embedding.0.bias": (D,),
              "time_embedding.2.weight": (D, D), "time_embedding.2.bias": (D,),
              "time_projection.1.weight": (6 * D, D), "time_projection.1.bias": (6 * D,),
              "head.head.weight": (4 * z, D), "head.head.bias": (4 * z,), "head.modulation": (1, 2, D)}
    for l in range(cfg["num_layers"]):
        p = f"blocks.{l}."
        shapes[p + "modulation"] = (1, 6, D)
        for a in ("self_attn", "cross_attn"):
            for n in "qkvo":
                shapes[f"{p}{a}.{n}.weight"] = (D, D)
                shapes[f"{p}{a}.{n}.bias"] = (D,)
            shapes[f"{p}{a}.norm_q.weight"] = (D,)
            shapes[f"{p}{a}.norm_k.weight"] = (D,)
        shapes[p + "norm3.weight"], shapes[p + "norm3.bias"] = (D,), (D,)
        shapes[p + "ffn.0.weight"], shapes[p + "ffn.0.bias"] = (Fw, D), (Fw,)
        shapes[p + "ffn.2.weight"], shapes[p + "ffn.2.bias"] = (D, Fw), (D,)
    sd = {}
    for k, s in shapes.items():
        n = torch.randn(*s, generator=g, dtype=torch.float64)
        if k.endswith("modulation"):
            v = 0.3 * n
        elif "norm" in k and k.endswith("weight"):
            v = 1 + 0.2 * n
        elif k.endswith("bias"):
            v = 0.1 * n
        else:
            v = n / math.sqrt(int(np.prod(s[1:])))
        sd[k] = v.to(torch.bfloat16)
    return sd


def world_k0_float64(sd, cfg, latent):
    """Layer 0's video keys straight from world-model.md §5.1, §5.2, §5.4, §5.5 in float64 with complex
    RoPE (per-token sinusoid, 5-D-free but otherwise the spec's own formulation)."""
    d = {k: v.double() for k, v in sd.items()}
    D, H, dh = cfg["dim"], cfg["num_heads"], cfg["attn_head_dim"]
    z, h, w = latent.shape[1:]
    Z = latent[0].double()
    toks = []
    for y in range(h // 2):
        for x in range(w // 2):
            patch = Z[:, 2 * y:2 * y + 2, 2 * x:2 * x + 2].reshape(-1)        # (c, a, b') order
            toks.append(d["patch_embedding.weight"].reshape(D, -1) @ patch + d["patch_embedding.bias"])
    X = torch.stack(toks)
    half = cfg["freq_dim"] // 2
    e = torch.cat([torch.cos(torch.zeros(half, dtype=torch.float64)), torch.sin(torch.zeros(half, dtype=torch.float64))])
    lin = lambda x, k: x @ d[k + ".weight"].t() + d[k + ".bias"]  # noqa: E731
    t = lin(torch.nn.functional.silu(lin(e, "time_embedding.0")), "time_embedding.2")
    TM = lin(torch.nn.functional.silu(t), "time_projection.1").reshape(6, D)
    M = d["blocks.0.modulation"][0] + TM
    mu = X.mean(-1, keepdim=True)
    ln = (X - mu) / torch.sqrt(((X - mu) ** 2).mean(-1, keepdim=True) + 1e-6)
    hh = ln * (1 + M[1]) + M[0]
    k = lin(hh, "blocks.0.self_attn.k")
    k = k / torch.sqrt((k ** 2).mean(-1, keepdim=True) + 1e-6) * d["blocks.0.self_attn.norm_k.weight"]
    dh3 = dh // 3
    dt = dh - 2 * dh3
    om = lambda n: 10000.0 ** (-2.0 * torch.arange(n // 2, dtype=torch.float64) / n)  # noqa: E731
    out = torch.empty_like(k)
    for n in range(k.shape[0]):
        y, x = divmod(n, w // 2)
        phi = torch.cat([0 * om(dt), y * om(dh3), x * om(dh3)])
        for hd in range(H):
            seg = k[n, hd * dh:(hd + 1) * dh]
            c = torch.complex(seg[0::2], seg[1::2]) * torch.polar(torch.ones_like(phi), phi)
            out[n, hd * dh:(hd + 1) * dh] = torch.stack([c.real, c.imag], dim=-1).reshape(-1)
    return out


class ActionGraphs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.W = export.load_action(os.path.join(GOLDEN, "tiny", "weights.safetensors"))

    def case(self, name):
        z = np.load(os.path.join(GOLDEN, "tiny", f"case_{name}.npz"))
        return {k: torch.from_numpy(z[k]) for k in z.files}

    def test_monolith_matches_golden(self):
        for name in ("all", "first4"):
            c = self.case(name)
            sv = c["video_keys"].shape[2]
            m = graphs.ActionStep(self.W, sv, int(c["visible_video"][0])).eval()
            worst = 0.0
            with torch.no_grad():
                for i in range(c["step_timesteps"].shape[0]):
                    got = m(c["step_latents"][i], c["step_timesteps"][i:i + 1], c["video_keys"], c["video_values"],
                            c["context"], c["context_mask"])
                    worst = max(worst, maxrel(got, c["step_pred"][i]))
                got = m(c["latents_action"], c["timestep"], c["video_keys"], c["video_values"], c["context"],
                        c["context_mask"])
                worst = max(worst, maxrel(got, c["pred_noise"]))
            figure(f"action_step (tiny, case {name}) vs golden/tiny step_pred+pred_noise: max|diff|/max|ref|", f"{worst:.3e}")
            self.assertLess(worst, 1e-4, name)

    def test_split_equals_monolith(self):
        c = self.case("first4")
        sv = c["video_keys"].shape[2]
        v1 = int(c["visible_video"][0])
        mono = graphs.ActionStep(self.W, sv, v1).eval()
        ctxg = graphs.ActionContext(self.W).eval()
        step = graphs.ActionStepCtx(self.W, sv, v1).eval()
        g = torch.Generator().manual_seed(3)
        with torch.no_grad():
            ck, cv = ctxg(c["context"])
            self.assertEqual(tuple(ck.shape), (2, 1, 5, 32))
            for tau in (1000.0, 952.381, 500.0, 37.5):
                lat = torch.randn(1, 32, 7, generator=g)
                t = torch.tensor([tau])
                a = mono(lat, t, c["video_keys"], c["video_values"], c["context"], c["context_mask"])
                b = step(lat, t, c["video_keys"], c["video_values"], ck, cv, c["context_mask"])
                self.assertTrue(torch.equal(a, b), f"tau {tau}: max|diff| {float((a - b).abs().max())}")
        figure("action_context + action_step_ctx vs action_step (tiny, 4 timesteps)", "torch.equal (bit for bit)")


class PrefillGraphs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sd = random_world(TINY_WORLD)
        meta = {graphs.WORLD_CONFIG_KEY: '{"num_heads": 2}'}
        cls.cfg = graphs.world_config(meta, cls.sd)
        g = torch.Generator().manual_seed(11)
        cls.latent = torch.randn(1, 4, 4, 8, generator=g)
        cls.context = torch.randn(1, 5, 32, generator=g)

    def test_config(self):
        self.assertEqual(self.cfg, TINY_WORLD)

    def test_chain_equals_monolith(self):
        N = self.cfg["num_layers"]
        mono = graphs.Prefill(self.sd, self.cfg, 0, N, (4, 8)).eval()
        with torch.no_grad():
            ctx_m, km, vm = mono(self.latent, self.context)
            for ranges in ([(0, 2), (2, 4), (4, 5)], [(0, 1), (1, 5)], [(0, 4), (4, 5)]):
                ks, vs = [], []
                hid, ctx = self.latent, self.context
                for i, (a, b) in enumerate(ranges):
                    part = graphs.Prefill(self.sd, self.cfg, a, b, (4, 8)).eval()
                    out = part(hid, ctx)
                    if a == 0:
                        ctx, out = out[0], out[1:]
                    self.assertEqual(len(out), 2 if b == N else 3)
                    ks.append(out[0])
                    vs.append(out[1])
                    self.assertEqual(tuple(out[0].shape), (b - a, 1, 8, 48))
                    if b != N:
                        hid = out[2]
                self.assertTrue(torch.equal(torch.cat(ks), km), f"{ranges}: keys differ")
                self.assertTrue(torch.equal(torch.cat(vs), vm), f"{ranges}: values differ")
                self.assertTrue(torch.equal(ctx, ctx_m))
        figure("prefill chains [0,2)+[2,4)+[4,5), [0,1)+[1,5), [0,4)+[4,5) vs monolithic prefill (tiny, 5 layers)",
               "torch.equal (bit for bit) on video_keys, video_values, ctx_v")

    def test_first_layer_against_float64(self):
        mono = graphs.Prefill(self.sd, self.cfg, 0, 1, (4, 8)).eval()
        with torch.no_grad():
            _, k, _, _ = mono(self.latent, self.context)
        ref = world_k0_float64(self.sd, self.cfg, self.latent)
        r = maxrel(k[0, 0], ref)
        figure("prefill layer-0 video_keys (patch embed, folded TM, 3-D RoPE) vs float64 complex-RoPE check", f"{r:.3e}")
        self.assertLess(r, 1e-5)

    def test_refuses_bad_tensors(self):
        sd = dict(self.sd)
        sd["blocks.2.ffn.0.weight"] = sd["blocks.2.ffn.0.weight"][:, :-1]
        del sd["blocks.3.self_attn.q.bias"]
        with self.assertRaisesRegex(graphs.GraphError, r"(?s)misshaped: blocks.2.ffn.0.weight is \[96, 47\].*missing: blocks.3.self_attn.q.bias"):
            graphs.world_config({graphs.WORLD_CONFIG_KEY: '{"num_heads": 2}'}, sd)
        vae, _ = read_safetensors(os.path.join(GOLDEN, "vae", "weights.safetensors"))
        vae["encoder.head.2.weight"] = vae["encoder.head.2.weight"][:, :, :2]
        with self.assertRaisesRegex(graphs.GraphError, "misshaped: encoder.head.2.weight"):
            graphs.VAEEncoder(vae, (64, 128))
        act, meta = read_safetensors(os.path.join(GOLDEN, "tiny", "weights.safetensors"))
        act["blocks.1.norm3.bias"] = act["blocks.1.norm3.bias"] * float("nan")
        with self.assertRaisesRegex(graphs.GraphError, "non-finite values: blocks.1.norm3.bias"):
            graphs.action_config(meta, act)

    def test_bad_range(self):
        with self.assertRaises(graphs.GraphError):
            graphs.Prefill(self.sd, self.cfg, 3, 3, (4, 8))
        with self.assertRaises(graphs.GraphError):
            export.parse_ranges("0:2,3:5", 5)
        with self.assertRaises(graphs.GraphError):
            export.parse_ranges("0:2,2:4", 5)


class VAEGraph(unittest.TestCase):
    def test_against_float64_reference(self):
        sd = export.load_vae(os.path.join(GOLDEN, "vae", "weights.safetensors"))
        z = np.load(os.path.join(GOLDEN, "vae", "vae.npz"))
        m = graphs.VAEEncoder(sd, tuple(z["image"].shape[2:])).eval()
        with torch.no_grad():
            got = m(torch.from_numpy(z["image"]))
        ref = torch.from_numpy(z["latent"])[:, :, 0]
        self.assertEqual(tuple(got.shape), tuple(ref.shape))
        r = maxrel(got, ref)
        figure("vae_encoder (rank 4, f32, d=4, 64x128) vs golden/vae float64 rank-5 reference latent", f"{r:.3e}")
        self.assertLess(r, 1e-5)


class Export(unittest.TestCase):
    def test_export_all_and_contracts(self):
        with tempfile.TemporaryDirectory() as d:
            world = os.path.join(d, "world.safetensors")
            write_safetensors(world, random_world(TINY_WORLD), {graphs.WORLD_CONFIG_KEY: '{"num_heads": 2}'})
            paths = export.export_all(os.path.join(d, "out"), action=os.path.join(GOLDEN, "tiny", "weights.safetensors"),
                                      world=world, ranges="0:2,2:5", vae=os.path.join(GOLDEN, "vae", "weights.safetensors"),
                                      image=(64, 128), video_tokens=8, context_rows=5, log=sys.stdout)
            want = {
                "vae_encoder": ({"image": [1, 3, 64, 128]}, {"latent": [1, 48, 4, 8]}),
                "prefill_0": ({"latent": [1, 4, 4, 8], "context": [1, 5, 32]},
                              {"ctx_v": [1, 5, 48], "video_keys": [2, 1, 8, 48], "video_values": [2, 1, 8, 48],
                               "hidden_out": [1, 8, 48]}),
                "prefill_1": ({"hidden": [1, 8, 48], "ctx_v": [1, 5, 48]},
                              {"video_keys": [3, 1, 8, 48], "video_values": [3, 1, 8, 48]}),
                "action_context": ({"context": [1, 5, 32]}, {"cross_keys": [2, 1, 5, 32], "cross_values": [2, 1, 5, 32]}),
                "action_step_ctx": ({"latents_action": [1, 32, 7], "timestep": [1], "video_keys": [2, 1, 8, 32],
                                     "video_values": [2, 1, 8, 32], "cross_keys": [2, 1, 5, 32],
                                     "cross_values": [2, 1, 5, 32], "context_mask": [1, 5]}, {"pred_noise": [1, 32, 7]}),
                "action_step": ({"latents_action": [1, 32, 7], "timestep": [1], "video_keys": [2, 1, 8, 32],
                                 "video_values": [2, 1, 8, 32], "context": [1, 5, 32], "context_mask": [1, 5]},
                                {"pred_noise": [1, 32, 7]}),
            }
            self.assertEqual(sorted(paths), sorted(want))
            ops = set()
            for name, (ins, outs) in want.items():
                m = onnx.load(paths[name])

                def io(vis):
                    return {v.name: [x.dim_value for x in v.type.tensor_type.shape.dim] for v in vis
                            if v.type.tensor_type.elem_type == TensorProto.FLOAT}
                self.assertEqual(io(m.graph.input), ins, name)
                self.assertEqual(io(m.graph.output), outs, name)
                self.assertEqual(list(io(m.graph.output)), list(outs), f"{name}: output order")
                ops |= {n.op_type for n in m.graph.node}
            figure("exported graphs (tiny), all linted rank <= 4", ", ".join(sorted(want)))
            figure("ops used", " ".join(sorted(ops)))
            self.evaluate(paths, world)

    def evaluate(self, paths, world):
        """Run the ONNX files themselves (golden/export/onnx_eval.py) against the torch modules and the goldens."""
        m = {k: onnx.load(p) for k, p in paths.items()}
        ev = lambda name, **feeds: list(onnx_eval.run(m[name], feeds).values())  # noqa: E731
        # The action graphs on golden/tiny's production case (every video token visible).
        z = np.load(os.path.join(GOLDEN, "tiny", "case_all.npz"))
        c = {k: torch.from_numpy(z[k]) for k in z.files}
        self.assertEqual(int(c["visible_video"][0]) or 8, 8)
        W = export.load_action(os.path.join(GOLDEN, "tiny", "weights.safetensors"))
        mono = graphs.ActionStep(W, 8).eval()
        worst_golden = worst_torch = 0.0
        split_equal = True
        for i in range(c["step_timesteps"].shape[0]):
            feeds = dict(latents_action=c["step_latents"][i], timestep=c["step_timesteps"][i:i + 1],
                         video_keys=c["video_keys"], video_values=c["video_values"], context=c["context"],
                         context_mask=c["context_mask"])
            (got,) = ev("action_step", **feeds)
            ck, cv = ev("action_context", context=c["context"])
            (split,) = ev("action_step_ctx", cross_keys=ck, cross_values=cv,
                          **{k: v for k, v in feeds.items() if k != "context"})
            split_equal &= torch.equal(split, got)
            with torch.no_grad():
                ref = mono(*feeds.values())
            worst_torch = max(worst_torch, maxrel(got, ref))
            worst_golden = max(worst_golden, maxrel(got, c["step_pred"][i]))
        figure("ONNX action_step (evaluated from the file) vs the torch module: max|diff|/max|ref|", f"{worst_torch:.3e}")
        figure("ONNX action_step vs golden/tiny step_pred (4 timesteps): max|diff|/max|ref|", f"{worst_golden:.3e}")
        figure("ONNX action_context + action_step_ctx vs ONNX action_step", "bit for bit" if split_equal else "DIFFERENT")
        self.assertTrue(split_equal)
        self.assertLess(worst_torch, 1e-5)
        self.assertLess(worst_golden, 1e-4)
        # The prefill chain, from the files, against the monolithic torch prefill.
        sd, meta = read_safetensors(world)
        cfg = graphs.world_config(meta, sd)
        g = torch.Generator().manual_seed(5)
        latent, context = torch.randn(1, 4, 4, 8, generator=g), torch.randn(1, 5, 32, generator=g)
        with torch.no_grad():
            _, km, vm = graphs.Prefill(sd, cfg, 0, 5, (4, 8)).eval()(latent, context)
        ctx_v, k0, v0, hid = ev("prefill_0", latent=latent, context=context)
        k1, v1 = ev("prefill_1", hidden=hid, ctx_v=ctx_v)
        r = max(maxrel(torch.cat([k0, k1]), km), maxrel(torch.cat([v0, v1]), vm))
        figure("ONNX prefill_0 -> prefill_1 chain (from the files) vs the monolithic torch prefill: max|diff|/max|ref|", f"{r:.3e}")
        self.assertLess(r, 1e-5)
        # The VAE graph from the file against the float64 reference's latent.
        zv = np.load(os.path.join(GOLDEN, "vae", "vae.npz"))
        (lat,) = ev("vae_encoder", image=torch.from_numpy(zv["image"]))
        r = maxrel(lat, torch.from_numpy(zv["latent"])[:, :, 0])
        figure("ONNX vae_encoder (from the file) vs golden/vae float64 latent: max|diff|/max|ref|", f"{r:.3e}")
        self.assertLess(r, 1e-5)


class RealInterfaces(unittest.TestCase):
    """The contracts' real I/O shapes (docs/graphs.md): the released token counts, image, latent and
    widths at every interface, with narrow insides (hidden 64, 2 layers; a 48-wide DiT) so the test
    stays small. Layer counts are the only sizes that differ from the real graphs'."""

    def test_real_io_shapes(self):
        import json
        from make_vae_golden import random_weights
        from reference import ActionExpert, init_random_
        cfg = {"hidden_dim": 64, "ffn_dim": 64, "num_heads": 24, "attn_head_dim": 128, "num_layers": 2,
               "text_dim": 4096, "freq_dim": 256, "eps": 1e-6, "action_dim": 7}
        m = ActionExpert(cfg)
        init_random_(m, torch.Generator().manual_seed(1))
        world = dict(TINY_WORLD, z_dim=48, text_dim=4096, num_layers=3)
        with tempfile.TemporaryDirectory() as d:
            a, w, v = (os.path.join(d, n + ".safetensors") for n in ("action", "world", "vae"))
            write_safetensors(a, {k: t.detach() for k, t in m.state_dict().items()}, {"fastwam_config": json.dumps(cfg)})
            write_safetensors(w, random_world(world), {graphs.WORLD_CONFIG_KEY: '{"num_heads": 2}'})
            write_safetensors(v, random_weights(4, np.random.default_rng(2)))
            paths = export.export_all(os.path.join(d, "out"), action=a, world=w, ranges="0:1,1:3", vae=v,
                                      log=io.StringIO())
            shapes = {}
            for name, p in paths.items():
                g = onnx.load(p).graph
                for vi in list(g.input) + list(g.output):
                    shapes[(name, vi.name)] = [x.dim_value for x in vi.type.tensor_type.shape.dim]
        want = {
            ("vae_encoder", "image"): [1, 3, 224, 448], ("vae_encoder", "latent"): [1, 48, 14, 28],
            ("prefill_0", "latent"): [1, 48, 14, 28], ("prefill_0", "context"): [1, 129, 4096],
            ("prefill_0", "video_keys"): [1, 1, 98, 48], ("prefill_0", "hidden_out"): [1, 98, 48],
            ("prefill_1", "hidden"): [1, 98, 48], ("prefill_1", "ctx_v"): [1, 129, 48],
            ("prefill_1", "video_values"): [2, 1, 98, 48],
            ("action_context", "context"): [1, 129, 4096], ("action_context", "cross_keys"): [2, 1, 129, 3072],
            ("action_step_ctx", "latents_action"): [1, 32, 7], ("action_step_ctx", "timestep"): [1],
            ("action_step_ctx", "video_keys"): [2, 1, 98, 3072], ("action_step_ctx", "cross_values"): [2, 1, 129, 3072],
            ("action_step_ctx", "context_mask"): [1, 129], ("action_step_ctx", "pred_noise"): [1, 32, 7],
            ("action_step", "context"): [1, 129, 4096], ("action_step", "video_values"): [2, 1, 98, 3072],
        }
        for k, s in want.items():
            self.assertEqual(shapes.get(k), s, k)
        figure("real interface shapes (224x448 image, 14x28 latent, 98 video tokens, 129x4096 context, width 3072)",
               "exported and linted")


class Linter(unittest.TestCase):
    def model(self, shape, op="Relu", elem=TensorProto.FLOAT):
        x = helper.make_tensor_value_info("x", elem, shape)
        y = helper.make_tensor_value_info("y", elem, shape)
        g = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g", [x], [y])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", export.OPSET)])

    def lint_model(self, m):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "m.onnx")
            onnx.save(m, p)
            return lint.lint(p)

    def test_refuses_rank5(self):
        with self.assertRaisesRegex(lint.LintError, "rank 5 > 4"):
            self.lint_model(self.model([1, 2, 3, 4, 5], "Sigmoid"))

    def test_refuses_rank5_intermediate(self):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4, 5])
        up = helper.make_tensor("s5", TensorProto.INT64, [5], [2, 3, 4, 5, 1])
        back = helper.make_tensor("s4", TensorProto.INT64, [4], [2, 3, 4, 5])
        g = helper.make_graph([helper.make_node("Reshape", ["x", "s5"], ["t"]),
                               helper.make_node("Reshape", ["t", "s4"], ["y"])], "g", [x], [y],
                              initializer=[up, back])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", export.OPSET)])
        with self.assertRaisesRegex(lint.LintError, "value_info 't': rank 5"):
            self.lint_model(m)

    def test_refuses_op_and_dtype(self):
        with self.assertRaisesRegex(lint.LintError, "op Relu not in the allowed list"):
            self.lint_model(self.model([1, 4]))
        with self.assertRaisesRegex(lint.LintError, "DOUBLE"):
            self.lint_model(self.model([1, 4], "Sigmoid", TensorProto.DOUBLE))

    def test_accepts_rank4(self):
        self.lint_model(self.model([1, 2, 3, 4], "Sigmoid"))


if __name__ == "__main__":
    unittest.main()
