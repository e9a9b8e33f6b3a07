"""Measurement records: their arithmetic, the interpreter path's honesty, the GPU lock."""
import threading

import pytest

from costmodel import Shape
from bench import measure as m
from bench.measure import Setting, attention_flops, bytes_moved, model_extra_bytes, oom_bytes


def test_flops_by_hand():
    s = Setting("fa2", Shape(seq_len=1024, batch=2, heads=16, head_dim=128))
    assert attention_flops(s) == 4 * 2 * 16 * 1024 * 1024 * 128 == 17_179_869_184
    assert attention_flops(Setting("fa2", Shape(seq_len=1024, batch=2, heads=16, head_dim=128, causal=True))) == 8_589_934_592


def test_bytes_come_from_the_cost_model():
    import costmodel
    # fused SDPA: Q, K, V read and O written once: 4 · B·H·N·D · 2 bytes
    assert bytes_moved(Setting("sdpa_flash", Shape(seq_len=1000, batch=1, heads=2, head_dim=64))) == 4 * 2 * 1000 * 64 * 2 == 1_024_000
    # standard: + S written and read (fp32) + P written and read (bf16)
    naive = Setting("naive", Shape(seq_len=1000, batch=1, heads=2, head_dim=64))
    assert bytes_moved(naive) == 1_024_000 + 2 * 2_000_000 * 4 + 2 * 2_000_000 * 2 == 25_024_000
    # causal: only the lower triangle of S (and of P on the read) moves; P is written whole
    tri = 2 * 1000 * 1001 // 2
    causal = Setting("naive", Shape(seq_len=1000, batch=1, heads=2, head_dim=64, causal=True))
    assert bytes_moved(causal) == 1_024_000 + 2 * tri * 4 + 2_000_000 * 2 + tri * 2
    # flash: the tiles the kernel runs, no cache without a machine
    flash = Setting("fa2", Shape(seq_len=1000, batch=1, heads=2, head_dim=64))
    block_m, block_n = m.flash_tiles(flash)
    assert bytes_moved(flash) == costmodel.total_bytes(
        costmodel.flash_traffic_no_cache(Shape(1000, 1, 2, 64), block_m, block_n))


def test_model_memory_by_hand():
    s = Shape(seq_len=4096, batch=1, heads=4, head_dim=64)
    assert model_extra_bytes(Setting("fa2", s)) == 4 * 4096 * 64 * 2 + 4 * 4096 * 4
    assert model_extra_bytes(Setting("naive", s)) == 4 * 4096 * 64 * 2 + 4 * 4096 * 4096 * 6


def test_oom_message_parsing():
    msg = "CUDA out of memory. Tried to allocate 64.00 GiB. GPU 0 has a total capacity of 139.81 GiB"
    assert oom_bytes(msg) == 64 << 30
    assert oom_bytes("Tried to allocate 512.50 MiB") == int(512.5 * 2**20)
    assert oom_bytes("something else") is None


@pytest.mark.parametrize("kwargs,words", [
    ({"algorithm": "fast"}, "unknown algorithm"), ({"seq_len": 0}, "seq_len"), ({"seq_len": -5}, "seq_len"),
    ({"seq_len": 1.5}, "seq_len"), ({"batch": True}, "batch"), ({"head_dim": 96}, "head_dim"),
    ({"dtype": "float64"}, "dtype"), ({"causal": 1}, "causal"), ({"seq_len": 1 << 30}, "supported"),
])
def test_bad_settings_are_rejected(kwargs, words):
    args = {"algorithm": "fa2", "seq_len": 128, **kwargs}
    with pytest.raises(ValueError, match=words):
        algorithm = args.pop("algorithm")
        Setting(algorithm, Shape(**args))


def test_an_older_name_is_read_as_todays():
    assert Setting("flash", Shape(128)).algorithm == "fa2" and Setting("flash_v3", Shape(128)).algorithm == "fa3"


@pytest.mark.skipif(not m.INTERPRET, reason="the interpreter path")
def test_interpreter_record_is_honest():
    r = m.measure(Setting("fa2", Shape(seq_len=128, batch=1, heads=2, head_dim=32, dtype="float32")))
    assert r.status == "ok" and r.timing_kind == "interpreter"
    assert r.device == "CPU (Triton interpreter)"
    assert r.time_ms > 0
    assert r.peak_extra_bytes is None and r.tflops is None and r.gbps is None  # not measurable on a CPU
    assert r.to_dict()["algorithm"] == "fa2"


@pytest.mark.skipif(not m.INTERPRET, reason="the interpreter path")
def test_interpreter_refuses_what_it_cannot_run():
    with pytest.raises(ValueError, match="too large"):
        m.measure(Setting("naive", Shape(seq_len=4096, heads=16)))
    with pytest.raises(ValueError, match="needs a GPU"):
        m.measure(Setting("sdpa_default", Shape(seq_len=128, heads=16)))
    with pytest.raises(TypeError):
        m.measure({"algorithm": "fa2"})


def test_lock_is_released_when_a_measurement_is_interrupted(monkeypatch):
    """A rerun cancelled mid-measurement (an exception through measure) must not leave the lock held."""
    monkeypatch.setattr(m, "INTERPRET", False)

    def interrupted(*args):
        raise KeyboardInterrupt("viewer moved the slider")
    monkeypatch.setattr(m, "_measure_cuda", interrupted)
    with pytest.raises(KeyboardInterrupt):
        m.measure(Setting("fa2", Shape(seq_len=1024, heads=16)))
    assert not m.GPU_LOCK.locked()


def test_busy_lock_times_out_with_a_message(monkeypatch):
    monkeypatch.setattr(m, "INTERPRET", False)
    monkeypatch.setattr(m, "GPU_LOCK_TIMEOUT_S", 0.05)
    holder_ready, release = threading.Event(), threading.Event()

    def hold():
        with m.GPU_LOCK:
            holder_ready.set()
            release.wait(5)
    t = threading.Thread(target=hold)
    t.start()
    holder_ready.wait(5)
    try:
        with pytest.raises(TimeoutError, match="busy"):
            m.measure(Setting("fa2", Shape(seq_len=1024, heads=16)))
    finally:
        release.set()
        t.join()
    assert not m.GPU_LOCK.locked()


def test_the_bench_reads_the_kernels_older_names_as_their_keys():
    from bench.cli import parse_args
    assert parse_args(["--algorithms", "flash,naive,flash_v1,flash_v3"]).algorithms == ["fa2", "naive", "fa1", "fa3"]
    with pytest.raises(SystemExit):
        parse_args(["--algorithms", "flash_v9"])
