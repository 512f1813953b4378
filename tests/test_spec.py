"""The op language: forms that parse, errors that name the bad token, and a fuzz."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftop.models.ops import Attention, Elementwise, FmaSweep, Gemm, Norm, Softmax
from rooftop.models.spec import SpecError, parse_count, parse_spec, parse_specs, split_specs


@pytest.mark.parametrize(
    "text,expected",
    [
        ("gemm 1 8192 8192 bf16", Gemm(m=1, n=8192, k=8192, dtype="bf16")),
        ("gemm m=4096 n=4096 k=4096 dtype=fp8", Gemm(m=4096, n=4096, k=4096, dtype="fp8")),
        ("GEMM 8 4k 4k float16 batch=3", Gemm(m=8, n=4096, k=4096, dtype="fp16", batch=3)),
        ("gemv 8192 8192 fp16", Gemm(m=1, n=8192, k=8192, dtype="fp16")),
        ("linear 16 2^12 4096 fp32 out=bf16", Gemm(m=16, n=4096, k=4096, dtype="fp32", out="bf16")),
        ("attn b=8 h=32 kv=8 d=128 t=8192 decode", Attention(b=8, h=32, kv=8, d=128, t=8192, mode="decode")),
        ("attention batch=2 heads=16 seq=2048 causal fp16", Attention(b=2, h=16, t=2048, causal=True, dtype="fp16")),
        ("ew n=1e9 fp32", Elementwise(n=10**9, dtype="fp32")),
        ("ew 1000 bf16 flops=1 reads=2", Elementwise(n=1000, dtype="bf16", flops=1.0, reads=2)),
        ("fma 64 fp64", FmaSweep(r=64, dtype="fp64")),
        ("fma r=2048 n=1e6", FmaSweep(r=2048, n=10**6)),
        ("rmsnorm 4096 4096", Norm(rows=4096, cols=4096, type="rms")),
        ("norm 16 4096 fp32 layer", Norm(rows=16, cols=4096, dtype="fp32", type="layer")),
        ("softmax rows=32 cols=8192 fp32", Softmax(rows=32, cols=8192, dtype="fp32")),
        ("gemm 1 8192 8192 bf16 level=l2", Gemm(m=1, n=8192, k=8192, level="l2")),
    ],
)
def test_parses(text: str, expected: object) -> None:
    assert parse_spec(text) == expected


@pytest.mark.parametrize(
    "text,names",
    [
        ("gemm 0 8192 8192", ["m='0'", "at least 1"]),
        ("gemm -4 8 8", ["'-4'"]),
        ("gemm 1.5 8 8", ["1.5", "whole number"]),
        ("gemm 1 8192", ["missing k"]),
        ("gemm 1 2 3 4", ["too many numbers", "'4'"]),
        ("gemm 1 2 3 fp99", ["'fp99'", "fp32"]),
        ("gemm 1 2 3 dtype=fp99", ["'fp99'", "bf16"]),
        ("gemm m=1 m=2 n=3 k=4", ["m given twice"]),
        ("gemm 1 2 3 x=4", ["unknown field 'x=4'", "batch"]),
        ("gem 1 2 3", ["unknown op 'gem'", "gemm"]),
        ("attn b=1 h=32 kv=5 t=100", ["kv=5 must divide h=32"]),
        ("attn 8 32 128", ["needs a name", "key=value"]),
        ("attn b=1 h=1 t=10 mode=fast", ["mode='fast'", "flash"]),
        ("fma 64 int8", ["'int8'", "fp32"]),
        ("ew n=1e400", ["too large"]),
        ("gemm 1 2 3 level=hbm9", ["'hbm9'", "dram"]),
        ("", ["empty op spec"]),
    ],
)
def test_errors_name_the_token_and_the_choices(text: str, names: list[str]) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(text)
    msg = str(err.value)
    assert "\n" not in msg
    for n in names:
        assert n in msg


def test_numbers() -> None:
    assert parse_count("8192") == 8192
    assert parse_count("1e9") == 10**9
    assert parse_count("2^20") == 2**20
    assert parse_count("8k") == 8192
    assert parse_count("1_000") == 1000
    assert parse_count(".5e1") == 5  # a leading point, as Python and C read it
    assert parse_count(".5k") == 512
    for bad in ("0", "1.5", "abc", "1e400", "2^99", "", ".", ".e3", "-.5e1"):
        with pytest.raises(SpecError):
            parse_count(bad)


def test_several_ops_split_at_op_names_and_semicolons() -> None:
    groups = split_specs(["gemm", "1", "8192", "8192", "bf16", "ew n=1e9 fp32; fma 4"])
    assert groups == [["gemm", "1", "8192", "8192", "bf16"], ["ew", "n=1e9", "fp32"], ["fma", "4"]]
    ops = parse_specs(["gemm 1 2 3", "softmax 4 5"])
    assert [o.kind for o in ops] == ["gemm", "softmax"]


@st.composite
def valid_ops(draw: st.DrawFn) -> object:
    dim = st.integers(min_value=1, max_value=2**20)
    kind = draw(st.sampled_from(["gemm", "attn", "ew", "fma", "norm", "softmax"]))
    if kind == "gemm":
        return Gemm(m=draw(dim), n=draw(dim), k=draw(dim), batch=draw(st.integers(1, 64)),
                    dtype=draw(st.sampled_from(["fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4"])))
    if kind == "attn":
        kv = draw(st.integers(1, 16))
        h = kv * draw(st.integers(1, 8))
        mode = draw(st.sampled_from(["flash", "naive", "decode"]))
        t = draw(dim)
        q = draw(st.integers(1, t)) if mode == "decode" else draw(dim)
        return Attention(b=draw(st.integers(1, 256)), h=h, kv=kv, d=draw(st.integers(1, 512)), q=q, t=t,
                         mode=mode, causal=draw(st.booleans()) and q <= t)  # causal needs q ≤ t
    if kind == "ew":
        return Elementwise(n=draw(dim), dtype=draw(st.sampled_from(["fp32", "bf16", "fp64"])),
                           flops=float(draw(st.integers(1, 100))), reads=draw(st.integers(1, 4)),
                           writes=draw(st.integers(1, 4)))
    if kind == "fma":
        return FmaSweep(r=draw(st.integers(1, 4096)), n=draw(dim), dtype=draw(st.sampled_from(["fp32", "fp64"])))
    if kind == "norm":
        return Norm(rows=draw(dim), cols=draw(dim), type=draw(st.sampled_from(["rms", "layer"])))
    return Softmax(rows=draw(dim), cols=draw(dim))


@pytest.mark.parametrize("text", [".5e1", "5.", "5.0", "+5", "0.5e1", "5E0", "5e+0", ".5E+1", "50e-1", "5_0e-1",
                                  "0_5.0e0_0_0"])
def test_every_float_python_reads_is_read_the_same_in_every_numeric_field(text: str) -> None:
    """Counts (positional or key=value) and real fields (flops=) take one number syntax, Python's own."""
    want = float(text)
    assert want == 5.0
    assert parse_spec(f"gemm {text} 8 8").m == 5 and parse_spec(f"gemm 8 8 8 batch={text}").batch == 5
    assert parse_spec(f"attn b=1 h=8 t={text}").t == 5 and parse_spec(f"ew {text}").n == 5
    assert parse_spec(f"ew 8 flops={text}").flops == want
    assert parse_spec("ew 8 flops=2^3").flops == 8 and parse_spec("ew 8 flops=1k").flops == 1024  # as a count


@pytest.mark.parametrize("text", ["1_", "1__0", "_1", "1._5", "1e", "e5", "1e_5", "nan", "inf", "-inf", "٣"])
def test_what_python_does_not_read_as_a_size_is_refused_in_every_field(text: str) -> None:
    for spec in (f"gemm 8 8 8 batch={text}", f"ew 8 flops={text}", f"attn b=1 h=8 t={text}"):
        with pytest.raises(SpecError) as err:
            parse_spec(spec)
        assert "\n" not in str(err.value) and repr(text) in str(err.value), spec
    with pytest.raises(SpecError):
        parse_spec(f"gemm {text} 8 8")


@given(valid_ops())
@settings(max_examples=300, deadline=None)
def test_canonical_spec_round_trips(op: object) -> None:
    again = parse_spec(op.spec())  # type: ignore[attr-defined]
    assert again.cost() == op.cost()  # type: ignore[attr-defined]
    assert again.spec() == op.spec()  # type: ignore[attr-defined]
    c = again.cost()
    assert c.flops > 0 and c.bytes > 0


_WORDS = ["gemm", "gemv", "attn", "ew", "fma", "norm", "softmax", "bf16", "fp8", "decode", "causal", "m=", "n=",
          "k=", "b=", "h=", "kv=", "t=", "d=", "q=", "=", "0", "-1", "1e9", "2^", "8k", "1.5", "level=", "dtype="]


@given(st.lists(st.one_of(st.sampled_from(_WORDS), st.text(max_size=8)), max_size=10))
@settings(max_examples=1000, deadline=None)
def test_fuzz_parser_only_raises_spec_error(words: list[str]) -> None:
    """Any input either parses to an op with a finite, positive cost or raises SpecError."""
    text = " ".join(words)
    try:
        op = parse_spec(text)
    except SpecError as err:
        assert "\n" not in str(err)
        return
    c = op.cost()
    assert c.flops > 0 and c.bytes > 0
    assert c.flops < float("inf") and c.bytes < float("inf")


@given(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=8), st.lists(st.integers(-3, 10**6), max_size=4))
@settings(max_examples=500, deadline=None)
def test_fuzz_structured(words: list[str], nums: list[int]) -> None:
    text = " ".join(words[:1] + [str(n) for n in nums] + words[1:])
    try:
        op = parse_spec(text)
    except SpecError as err:
        assert "\n" not in str(err)
    else:
        assert op.cost().intensity > 0
        assert parse_spec(op.spec()) == op or op.kind == "attn"  # attn fills kv/q defaults in its spec


def test_a_causal_attention_reads_as_causal() -> None:
    """Both were 'flash attention b=1 h=32 d=128 q=4096 t=4096 bf16' beside W 137 and 275 GFLOP."""
    full, causal = parse_spec("attn b=1 h=32 t=4096"), parse_spec("attn b=1 h=32 t=4096 causal")
    assert "causal" in causal.describe() and "causal" not in full.describe()
    assert causal.describe().replace(" causal", "") == full.describe()


def test_a_whole_average_reads_as_a_whole_number() -> None:
    """A MoE expert's rows are an average (tokens × top-k / experts): a whole one printed as `GEMV 1.0×…`."""
    from rooftop.models.ops import Elementwise

    assert Gemm(m=1.0, n=14336, k=4096).describe().startswith("GEMV 1×14336×4096")
    assert Gemm(m=0.25, n=14336, k=4096).describe().startswith("GEMM 0.25×14336")
    assert Elementwise(n=96.0).describe().startswith("elementwise n=96 ")


@pytest.mark.parametrize("world", ["0", "1", "-3"])
def test_every_too_small_world_is_told_one_rule(world: str) -> None:
    """world=1 said 'at least 2' but world=0 'at least 1'."""
    with pytest.raises(SpecError, match="must be at least 2 \\(ranks taking part\\)"):
        parse_spec(f"allreduce 16M world={world}")
