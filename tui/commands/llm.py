"""`rooftop llm`: a transformer's prefill or decode step on a device's roofline."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from rooftop.models.dtypes import parse_dtype
from rooftop.models.llm.claims import claim_dict
from rooftop.models.llm.step import Phase, amdahl, compute_bound_batch, llm_doc, step_bound, with_dtype
from rooftop.models.plotdata import llm_step_series
from rooftop.store.hfconfig import load_arch
from rooftop.tui.commands.common import (
    UsageError, _device_list, _int_list, _measured_times, _named_values, add_db_option, add_device_option,
    add_out_option, command_text,
)
from rooftop.tui.render.jsonout import print_json
from rooftop.tui.render.report import Prose, make_console
from rooftop.tui.services.context import resolve_devices, store_profiles


def cmd_llm(args: argparse.Namespace) -> int:
    if args.out:
        # deferred: the share modules (xml.etree, ~20 ms of imports), only with --out
        from rooftop.tui.share.out import out_target

        out_target(args.out)  # a bad path said before the model is read
    arch = load_arch(args.model)
    if args.dtype:
        arch = with_dtype(arch, parse_dtype(args.dtype).name)
    kv_dtype = parse_dtype(args.kv_dtype).name if args.kv_dtype else None
    if args.mla:
        if arch.mla is None:
            raise UsageError(f"--mla applies to multi-head latent attention (a config with kv_lora_rank, as "
                             f"DeepSeek-V2/V3 and Kimi K2 give); {arch.name} has none")
        arch = replace(arch, mla=replace(arch.mla, convention=args.mla))
    if args.context and args.phase == "prefill":  # it was taken and ignored: rows of the same prefill
        raise UsageError("--context is the decode step's KV-cache length; a prefill reads its prompt: give --prompt N")
    batches = _int_list(args.batch, "batch")
    (prompt,) = _int_list(args.prompt, "prompt", one=True)
    contexts = _int_list(args.context, "context") if args.context else [prompt]
    parts = _named_values(args.parts, "parts")
    if args.speedup and not parts:
        raise UsageError("--speedup needs --parts: the end-to-end time table it applies to")
    split = amdahl(parts, _named_values(args.speedup, "speedup")) if parts else None
    ids = _device_list(args.device)
    device = resolve_devices(ids, store_profiles(args.db, ids))[0]
    phases = [Phase(args.phase, b, prompt=prompt, context=c, kv_dtype=kv_dtype) for c in contexts for b in batches]
    times = _measured_times(args.measured_ms, len(phases))
    claims = _measured_times(args.measured_tokens_per_s, len(phases), "--measured-tokens-per-s", "tok/s")
    # a --tp / --pp / --ep the model does not split into is a ModelError: one line, exit 2
    steps = [step_bound(arch, ph, device, t, tp=args.tp, pp=args.pp, ep=_ep(args, arch, ph), claimed_tokens_per_s=c)
             for ph, t, c in zip(phases, times, claims)]
    flips = {}
    if args.phase == "decode":
        flips = {
            "linear_layers": compute_bound_batch(arch, device, contexts[0], kv_dtype, linear_only=True),
            "whole_step": compute_bound_batch(arch, device, contexts[0], kv_dtype),
        }
    dims = _parallel(args, arch, steps[0])
    if args.out:
        # deferred: the share modules (xml.etree, ~60 ms of imports), only with --out
        from rooftop.tui.share.figure import Chart, chart_svg_inline
        from rooftop.tui.share.html import rooftop_version
        from rooftop.tui.share.out import Shared, share_out
        from rooftop.tui.share.reports import llm_report

        s0 = steps[0]
        chart = Chart("roofline", llm_step_series(s0), f"{arch.name} {s0.phase.kind}, batch {s0.phase.batch}",
                      f"{device.id} ({device.source})")
        doc = llm_doc(arch, device, steps, dims, flips, split, step_dict=_step_dict)
        share_out(args.out, Shared([chart], lambda: llm_report(doc, [chart_svg_inline(chart)],
                                                               version=rooftop_version(), command=command_text(args))))
    if args.json:
        print_json(llm_doc(arch, device, steps, dims, flips, split, step_dict=_step_dict))
        return 0
    # deferred: the llm tables (~12 ms of imports), only when they are printed
    from rooftop.tui.render.llm import amdahl_table, llm_ops_table, llm_steps_table

    console = make_console()
    console.print(llm_steps_table(steps))
    if flips:
        lin, whole = flips["linear_layers"], flips["whole_step"]
        console.print(Prose(
            f"linear layers turn compute-bound from batch ≈ {lin if lin else 'never'} (their I ≈ batch); "
            f"the whole step at context {contexts[0]} "
            + (f"from batch ≈ {whole}" if whole else "never: each request's KV cache keeps attention memory-bound")
        ))
    console.print()
    console.print(llm_ops_table(steps[0]))
    if split:
        console.print()
        console.print(amdahl_table(split))
    if dims:
        # deferred: the llm tables (~12 ms of imports), only when they are printed
        from rooftop.tui.render.llm import parallel_table

        console.print()
        console.print(parallel_table(dims, device, steps[0]))
    return 0


def _parallel(args: argparse.Namespace, arch: Any, step: Any) -> list[Any]:
    """--tp / --pp: each dimension's communication for the first step, one rank's (empty when both are 1)."""
    # deferred: the tensor/pipeline-parallel model (~4 ms of imports), only with --tp or --pp
    from rooftop.models.llm.parallel import parallel_comm

    dims = parallel_comm(arch.layers, arch.hidden, arch.dtype, step.phase.tokens, step.flops, step.compute_s,
                         args.tp, args.pp, per_rank=step.ranks > 1, vocab=arch.vocab, logits_rows=step.phase.batch)
    return dims + ([step.ep.comm_dim(step.flops, step.compute_s)] if step.ep else [])


def _step_dict(step: Any) -> dict[str, Any]:
    """A step for --json, with its tokens/s claim judged where one was given."""
    out: dict[str, Any] = step.to_dict()
    if step.claimed_tokens_per_s:
        out["claim"] = claim_dict(step, step.claimed_tokens_per_s)
    return out


def _ep(args: argparse.Namespace, arch: Any, phase: Any) -> Any:
    """--ep / --ep-imbalance: the busiest expert-parallel rank for this step (None without EP)."""
    # deferred: the expert-parallel model (~7 ms of imports), only with --ep
    from rooftop.models.llm.expertparallel import expert_parallel

    return expert_parallel(arch, phase, args.ep, args.ep_imbalance)


def add_llm_command(sub: Any) -> None:
    """llm."""
    lm = sub.add_parser(
        "llm", help="an LLM's prefill or decode step on the roofline",
        description="Place a transformer's prefill or decode step on a device's roofline: the per-layer ops, the "
                    "step's lower bound (bytes read over B, and the sum of each op's bound), the tokens/s ceiling, "
                    "and the batch at which decode turns compute-bound.",
        epilog="MODEL is a built-in (qwen2.5-7b, llama-3.1-8b, mixtral-8x7b, … — see the error for the list) or a "
               "Hugging Face config.json (or its folder).\n\nexamples:\n"
               "  rooftop llm qwen2.5-7b --device h100 --batch 1,8,16 \\\n"
               "      --measured-ms 11.56,11.9,12.5\n"
               "  rooftop llm llama-3.1-8b --phase prefill --prompt 2048 --device h200\n"
               "  rooftop llm ./config.json --context 4096 --kv-dtype fp8 --json\n"
               "  rooftop llm qwen2.5-7b --parts attention=17.6,mlp=24,runtime=6,comm=10.4 \\\n"
               "      --speedup attention=1.67",
    )
    lm.add_argument("model", metavar="MODEL", help="built-in model name or config.json path")
    lm.add_argument("--phase", choices=("decode", "prefill"), default="decode", help="default: decode")
    lm.add_argument("--batch", default="1", metavar="LIST", help="batch sizes, comma-separated (default 1)")
    lm.add_argument("--prompt", default="128", metavar="N", help="prompt tokens (default 128)")
    lm.add_argument("--context", metavar="LIST", help="decode: tokens in the KV cache, comma-separated (default: the prompt)")
    lm.add_argument("--dtype", metavar="DTYPE", help="weight dtype (default: the config's)")
    lm.add_argument("--kv-dtype", metavar="DTYPE", help="KV-cache dtype, e.g. fp8 (default: the weights')")
    add_device_option(lm, "device id (default: this machine's measured profile `local`, else this GPU's "
                          "reference, else h100)")
    lm.add_argument("--measured-ms", metavar="T", help="measured step times in ms, one per batch × context")
    lm.add_argument("--parts", metavar="NAME=MS,…", help="an end-to-end time table for an Amdahl breakdown")
    lm.add_argument("--speedup", metavar="NAME=X,…", help="speed-up factors of some parts")
    lm.add_argument("--mla", choices=("absorbed", "expanded"),
                    help="multi-head latent attention (DeepSeek-V2/V3, Kimi K2): absorbed (the default, as FlashMLA "
                         "decodes: attention in the latent space, kv_b_proj folded into the query and output) or "
                         "expanded (each step up-projects the cached latents to per-head K and V, then multi-head "
                         "attention); the KV cache holds the latent either way")
    lm.add_argument("--tp", type=int, default=1, metavar="N", help="tensor-parallel ranks: their all-reduces per step")
    lm.add_argument("--pp", type=int, default=1, metavar="N", help="pipeline stages: their sends per step")
    lm.add_argument("--json", action="store_true", help="print JSON (SI units)")
    add_out_option(lm, ".html the report (the bound table, the per-layer ops), .svg or .png the roofline")
    add_db_option(lm)
    lm.add_argument("--ep", type=int, default=1, metavar="N",
                    help="expert-parallel ranks: a MoE model's routed experts split N ways, each rank running its own "
                         "batch; each MoE layer's dispatch and combine all-to-alls are added to the bound")
    lm.add_argument("--ep-imbalance", type=float, default=1.0, metavar="F",
                    help="with --ep: the busiest rank's expert load over the mean (default 1, balanced); it scales "
                         "that rank's expert weights read, expert compute and all-to-all bytes")
    lm.add_argument("--measured-tokens-per-s", metavar="X",
                    help="claimed or measured tokens/s, one per batch × context: flagged when above the bound, "
                         "naming what caps it (the weights, the KV cache, the ops together, the launch floor)")
    lm.set_defaults(func=cmd_llm)
