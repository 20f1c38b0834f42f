"""CLI behaviour and exit codes (DESIGN.md): 0 ok, 2 bad input, 3 build failed, 4 no GPU, 1 else."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from ftgen.cli import main

HAS_NVCC = shutil.which("nvcc") is not None or Path("/usr/local/cuda/bin/nvcc").is_file()


def write(p: Path, text: str) -> Path:
    p.write_text(text)
    return p


def test_help_and_version(capsys):
    assert main(["--help"]) == 0
    assert "generate" in capsys.readouterr().out
    assert main(["--version"]) == 0


def test_list_shows_families_params_constraints(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "gemm" in out and "m_tb" in out and "threads per block" in out
    assert main(["list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert any(d["family"] == "gemm" for d in data)
    assert main(["list", "nosuch"]) == 2


def test_unknown_flag_is_exit_2(capsys):
    assert main(["bench", "--reps", "zero"]) == 2


def test_bench_without_project_is_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["bench"]) == 2
    assert "ftgen generate" in capsys.readouterr().err


def test_generate_prints_variants_and_rejections(tmp_path, capsys):
    spec = write(tmp_path / "s.yaml", "name: s\nfamily: gemm\nparams: {m_t: [8, 16]}\n")
    assert main(["generate", str(spec), "-o", str(tmp_path / "g")]) == 0
    cap = capsys.readouterr()
    assert cap.out.strip() == "gemm_f32_none_128x128x8_w32x64_t8x8_s3"
    assert "rejected by constraints" in cap.err and "not 32" in cap.err


def test_internal_errors_have_no_traceback(monkeypatch, capsys):
    import ftgen.cli as cli

    def boom(*a, **k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(cli, "_project_dir", boom)
    assert main(["build"]) == 1
    err = capsys.readouterr().err
    assert "kaboom" in err and "Traceback" not in err


@pytest.mark.compile
@pytest.mark.skipif(not HAS_NVCC or shutil.which("cmake") is None or shutil.which("ninja") is None, reason="needs nvcc, cmake, ninja")
def test_generate_build_bench_without_gpu(tmp_path, capsys, monkeypatch):
    """The demo path on a machine without a GPU: generate and build work, bench says so and exits 4;
    a second build compiles nothing."""
    spec = write(
        tmp_path / "s.yaml",
        "name: s\nfamily: gemm\narch: [sm_90]\nparams: {m_tb: 32, n_tb: 32, k_tb: 8, m_w: 16, n_w: 32, m_t: 4, n_t: 4, stages: 2}\n",
    )
    out = tmp_path / "g"
    assert main(["generate", str(spec), "-o", str(out)]) == 0
    assert main(["build", str(out / "s"), "-j", "2"]) == 0
    assert (out / "s" / "bin" / "gemm_f32_none_32x32x8_w16x32_t4x4_s2").is_file()
    capsys.readouterr()
    assert main(["build", str(out / "s")]) == 0
    assert "0 compiled, 1 up to date" in capsys.readouterr().err
    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU tool is present: the no-GPU path cannot be shown here")
    assert main(["bench", str(out / "s")]) == 4
    assert "no CUDA GPU" in capsys.readouterr().err


@pytest.mark.compile
@pytest.mark.skipif(not HAS_NVCC or shutil.which("cmake") is None, reason="needs nvcc and cmake")
def test_build_failure_is_exit_3(tmp_path, capsys):
    spec = write(tmp_path / "s.yaml", "name: s\nfamily: gemm\narch: [sm_90]\nparams: {m_tb: 32, n_tb: 32, k_tb: 8, m_w: 16, n_w: 32, m_t: 4, n_t: 4}\n")
    out = tmp_path / "g"
    assert main(["generate", str(spec), "-o", str(out)]) == 0
    cu = next((out / "s").glob("gemm_*/gemm_*_s3.cu"))
    cu.write_text(cu.read_text() + "\nthis is not C++;\n")
    assert main(["build", str(out / "s"), "-j", "2"]) == 3
    assert "failed to compile" in capsys.readouterr().err


# ---- hardening: environment problems and bad paths exit 2 with a message, no traceback -------

SMALL = "name: s\nfamily: gemm\narch: [sm_90]\nparams: {m_tb: 32, n_tb: 32, k_tb: 8, m_w: 16, n_w: 32, m_t: 4, n_t: 4, stages: 2}\n"


def _run(capsys, *argv):
    rc = main(list(argv))
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err + cap.out
    return rc, cap


def test_help_has_exit_codes_defaults_and_gpu_notes(capsys):
    rc, cap = _run(capsys, "--help")
    assert rc == 0 and "Exit codes" in cap.out and "130" in cap.out and "no usable GPU" in cap.out
    for cmd in ("bench", "search", "campaign"):
        rc, cap = _run(capsys, cmd, "--help")
        assert rc == 0 and "Needs a CUDA GPU" in cap.out, cmd
    rc, cap = _run(capsys, "search", "--help")
    out = " ".join(cap.out.split())
    for helptext in ("-j, --jobs INTEGER RANGE Parallel compile jobs", "--reps INTEGER RANGE Timed repetitions",
                     "--warmup INTEGER RANGE Untimed warm-up"):
        assert helptext in out, helptext
    assert "[default: exhaustive]" in out and "[default: 4096;" in out
    rc, cap = _run(capsys, "bench", "--help")
    out = " ".join(cap.out.split())
    assert "--inject-kind [bitflip|offset] Fault model" in out and "[default: 600.0;" in out


def test_out_root_that_is_a_file_or_too_long(tmp_path, capsys):
    spec = write(tmp_path / "s.yaml", SMALL)
    f = write(tmp_path / "afile", "x")
    rc, cap = _run(capsys, "generate", str(spec), "-o", str(f))
    assert rc == 2 and "not a directory" in cap.err
    rc, cap = _run(capsys, "generate", str(spec), "-o", str(f / "sub"))
    assert rc == 2 and "not a directory" in cap.err
    rc, cap = _run(capsys, "generate", str(spec), "-o", str(tmp_path / ("a" * 300)))
    assert rc == 2 and "too long" in cap.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "s.yaml"]  # nothing half-written


def test_read_only_output_is_exit_2(tmp_path, capsys, monkeypatch):
    import errno

    import ftgen.codegen.emit as emit

    def readonly(out, files):
        raise OSError(errno.EROFS, "Read-only file system", str(out))

    monkeypatch.setattr(emit, "write_tree", readonly)
    spec = write(tmp_path / "s.yaml", SMALL)
    rc, cap = _run(capsys, "generate", str(spec), "-o", str(tmp_path / "g"))
    assert rc == 2 and "Read-only file system" in cap.err and "-o" in cap.err


def test_spec_device_fifo_and_directory(tmp_path, capsys):
    fifo = tmp_path / "f.yaml"
    os.mkfifo(fifo)
    for path, what in (("/dev/null", "device"), (str(fifo), "FIFO"), (str(tmp_path), "directory")):
        rc, cap = _run(capsys, "generate", path, "-o", str(tmp_path / "g"))
        assert rc == 2 and what in cap.err, path
    assert not (tmp_path / "g").exists()


def test_missing_or_corrupt_project_is_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, cap = _run(capsys, "build", "nosuch")
    assert rc == 2 and "no such directory" in cap.err
    rc, cap = _run(capsys, "build", str(write(tmp_path / "file", "x")))
    assert rc == 2 and "not a directory" in cap.err
    (tmp_path / "p").mkdir()
    rc, cap = _run(capsys, "build", "p")
    assert rc == 2 and "no generated project here" in cap.err
    for text in ("{}", "[1, 2]", "{not json", '{"spec": {"name": "s", "family": "gemm", "arch": []}, "variants": [{"kernel": "../x"}]}'):
        (tmp_path / "p" / "manifest.json").write_text(text)
        for cmd in ("build", "bench"):
            rc, cap = _run(capsys, cmd, "p")
            assert rc == 2 and "re-generate" in cap.err, (cmd, text, cap.err)


def test_bare_command_acts_on_the_last_generated_project_and_says_so(tmp_path, capsys, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    spec = write(work / "s.yaml", SMALL)
    # an older project under generated/ must not win over the one just generated elsewhere
    assert main(["generate", str(spec)]) == 0
    other = tmp_path / "x"
    assert main(["generate", str(spec), "-o", str(other)]) == 0
    capsys.readouterr()
    rc, cap = _run(capsys, "bench")
    assert rc == 2 and f"bench: {other / 's'}" in cap.err and "nothing built yet" in cap.err


def test_list_per_backend_structured(capsys, monkeypatch):
    """`ftgen list` renders the per-backend description, and the flat one of older families."""
    from ftgen import families

    fam = families.get("gemm")
    desc = {
        "family": "gemm", "description": "d", "shape_keys": ["m", "n", "k"], "precisions": ["fp32", "tf32"],
        "backends": [
            {"name": "simt", "precisions": ["fp32"], "schemes": {"abft": ["threadblock"]}, "requires": [],
             "params": [{"name": "stages", "type": "int", "choices": [2, 3, 4, 5, 6], "range": None, "default": 3, "doc": "pipeline"},
                        {"name": "m_tb", "type": "int", "choices": None, "range": [16, 256], "default": 128, "doc": "rows"}]},
            {"name": "cutlass", "precisions": ["tf32"], "schemes": {"tmr": ["kernel"]}, "requires": ["cutlass"],
             "params": [{"name": "stages", "type": "int", "choices": None, "range": [2, 8], "default": 3, "doc": "stages"},
                        {"name": "teams", "type": "int", "choices": None, "range": [0, None], "default": 0, "doc": "teams"}]},
        ],
        "constraints": ["c1"],
    }
    monkeypatch.setattr(type(fam), "describe", lambda self: desc)
    rc, cap = _run(capsys, "list", "gemm")
    assert rc == 0
    out = cap.out
    simt, cutlass = out.index("backend simt"), out.index("backend cutlass")
    assert "2, 3, 4, 5, 6" in out[simt:cutlass] and "16 .. 256" in out[simt:cutlass] and "2 .. 8" in out[cutlass:]
    assert ">= 0" in out[cutlass:] and "None" not in out  # a range open above
    assert "requires: cutlass" in out and "c1" in out
    rc, cap = _run(capsys, "list", "gemm", "--json")
    assert json.loads(cap.out) == [desc]


def test_progress_lines_without_a_terminal(capsys, monkeypatch):
    import ftgen.cli as cli

    monkeypatch.setattr(cli, "_stderr_tty", lambda: False)
    with cli.Progress("built", min_interval=0.0) as prog:
        for i in range(1, 4):
            prog(i, 3, f"Linking CUDA executable /p/bin/k{i}")
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("[1/3] built k1") and "ETA" in err[0] and err[-1].startswith("[3/3] built k3")
    with cli.Progress("built", min_interval=3600) as prog:  # a modest rate: the first and last step only
        for i in range(1, 51):
            prog(i, 50, f"k{i}")
    assert [ln.split()[0] for ln in capsys.readouterr().err.splitlines()] == ["[1/50]", "[50/50]"]


def test_bad_campaign_and_search_flags_are_refused_before_any_work(tmp_path, capsys, monkeypatch):
    """Flags that can only fail are exit 2 before anything is generated or built: an empty or repeated --dists, an
    output file that is a directory, a malformed --gpus (on any machine), more shards than the work has."""
    monkeypatch.chdir(tmp_path)
    spec = write(tmp_path / "c.yaml", "name: c\nfamily: gemm\nprotection: {scheme: abft, level: threadblock, inject: true}\n"
                 "shapes: [{m: 64, n: 64, k: 64}]\n")
    cases = [
        (["campaign", str(spec), "--dists", ","], "at least one"),
        (["campaign", str(spec), "--dists", "normal,normal"], "named twice"),
        (["campaign", str(spec), "--json", str(tmp_path)], "is a directory"),
        (["campaign", str(spec), "--trials", "10", "--dists", "normal", "--shard", "0/3"], "at most that many shards"),
        (["search", str(spec), "--shard", "0/2"], "at most that many shards"),
        (["search", str(spec), "--write-tuning", str(tmp_path)], "is a directory"),
        (["campaign", str(spec), "--gpus", "abc"], "not a GPU index"),
        (["campaign", str(spec), "--gpus", "0-3"], "not a GPU index"),
    ]
    for argv, words in cases:
        assert main([*argv, "-o", str(tmp_path / "out")]) == 2, argv
        assert words in capsys.readouterr().err, argv
        assert not (tmp_path / "out").exists(), argv  # nothing generated
    assert not list(tmp_path.glob("*.tmp*"))


def test_generate_into_a_file_or_a_foreign_folder_is_exit_2(tmp_path, capsys):
    spec = write(tmp_path / "gg.yaml", "name: gg\nfamily: gemm\n")
    (tmp_path / "o1").mkdir()
    write(tmp_path / "o1" / "gg", "x")
    (tmp_path / "o2" / "gg").mkdir(parents=True)
    write(tmp_path / "o2" / "gg" / "notes.txt", "precious")
    assert main(["generate", str(spec), "-o", str(tmp_path / "o1")]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert main(["generate", str(spec), "-o", str(tmp_path / "o2")]) == 2
    assert "refusing to write" in capsys.readouterr().err
    assert (tmp_path / "o2" / "gg" / "notes.txt").read_text() == "precious"


@pytest.mark.parametrize("row, words", [
    ({"kernel": "gemm_f32_none_128x128x8_w32x64_t8x8_s3", "shape": {"m": 64, "n": 64, "k": 64}, "ms": 1.0}, "ms is 1.0"),
    ({"kernel": ["gemm_f32_none_128x128x8_w32x64_t8x8_s3"], "shape": {"m": 64, "n": 64, "k": 64}}, "kernel is"),
    ({"kernel": "gemm_f32_none_128x128x8_w32x64_t8x8_s3", "shape": {"m": 64}}, "missing shape key"),
    ({"kernel": "gemm_f32_none_128x128x8_w32x64_t8x8_s3", "shape": {"m": 64, "n": 64, "k": 64}, "ms": {"median": "x"}}, "ms is"),
])
def test_a_results_file_with_rows_ftgen_does_not_write_is_bad_input(tmp_path, capsys, row, words):
    """`search --from` names the file, the line and the field of a row that is no ftgen row, and writes nothing."""
    spec = write(tmp_path / "s.yaml", "name: s\nfamily: gemm\nshapes: [{m: 64, n: 64, k: 64}]\n")
    bad = write(tmp_path / "r.jsonl", json.dumps({"provenance": {"gpu": "NVIDIA H200"}}) + "\n" + json.dumps(row) + "\n")
    assert main(["search", str(spec), "--from", str(bad), "-o", str(tmp_path / "out"), "--json", str(tmp_path / "m.jsonl")]) == 2
    err = capsys.readouterr().err
    assert words in err and "r.jsonl" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "m.jsonl").exists()


def test_build_refuses_a_project_whose_sources_vanished(tmp_path, capsys):
    """Deleted variant sources are a missing project (exit 2, the files named, `ftgen generate` to restore them), found
    before the build system runs."""
    spec = write(tmp_path / "s.yaml", SMALL)
    assert main(["generate", str(spec), "-o", str(tmp_path / "g")]) == 0
    project = tmp_path / "g" / "s"
    kernel = "gemm_f32_none_32x32x8_w16x32_t4x4_s2"
    shutil.rmtree(project / kernel)
    capsys.readouterr()
    rc, cap = _run(capsys, "build", str(project), "-j", "1")
    assert rc == 2, cap.err
    assert f"{kernel}/ (all its sources)" in cap.err and f"ftgen generate {spec} -o {tmp_path / 'g'}`" in cap.err, cap.err
    assert not (project / "build").exists()  # CMake was never run
    assert main(["generate", str(spec), "-o", str(tmp_path / "g")]) == 0
    (project / kernel / f"{kernel}_bench.cu").unlink()
    rc, cap = _run(capsys, "build", str(project), "-j", "1")
    assert rc == 2 and f"missing or unreadable: {kernel}/{kernel}_bench.cu;" in cap.err, cap.err


def test_site_names_a_fault_site_of_the_family(tmp_path, capsys, monkeypatch):
    """--site is checked by ftgen against the family's sites, before anything is generated or run."""
    monkeypatch.chdir(tmp_path)
    spec = write(tmp_path / "c.yaml", "name: c\nfamily: gemm\nprotection: {scheme: abft, level: threadblock, inject: true}\n"
                 "shapes: [{m: 64, n: 64, k: 64}]\n")
    for site in ("bogus", ""):
        rc, cap = _run(capsys, "campaign", str(spec), "--site", site, "-o", str(tmp_path / "out"))
        assert rc == 2 and "--site:" in cap.err and "allowed: accumulator" in cap.err, cap.err
        assert not (tmp_path / "out").exists()
    km = write(tmp_path / "k.yaml", "name: k\nfamily: kmeans\narch: [sm_90]\n")
    assert main(["generate", str(km), "-o", str(tmp_path / "g")]) == 0
    capsys.readouterr()
    rc, cap = _run(capsys, "bench", str(tmp_path / "g" / "k"), "--site", "acc")
    assert rc == 2 and "allowed: accumulator, argmin, norm, update, refine" in cap.err, cap.err
    rc, cap = _run(capsys, "bench", str(tmp_path / "g" / "k"), "--site", "argmin")
    assert rc == 2 and "nothing built yet" in cap.err  # a known site passes on to the next check


def test_out_root_with_a_control_character_or_empty_is_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = write(tmp_path / "s.yaml", SMALL)
    for out in ("x\ny", "x\ty", ""):
        rc, cap = _run(capsys, "generate", str(spec), "-o", out)
        assert rc == 2 and "-o/--out" in cap.err, (out, cap.err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]  # nothing written


def test_empty_or_malformed_shape_flags_are_refused(tmp_path, capsys, monkeypatch):
    """An empty --shapes / --shape / --shard is bad input, not the defaults; --shape takes one shape; shapes are ASCII."""
    monkeypatch.chdir(tmp_path)
    spec = write(tmp_path / "c.yaml", "name: c\nfamily: gemm\nprotection: {scheme: abft, level: threadblock, inject: true}\n"
                 "shapes: [{m: 64, n: 64, k: 64}]\n")
    assert main(["generate", str(spec), "-o", str(tmp_path / "g")]) == 0
    capsys.readouterr()
    cases = [
        (["bench", str(tmp_path / "g" / "c"), "--shapes", ""], "--shapes: no shapes"),
        (["bench", str(tmp_path / "g" / "c"), "--shapes", "\uff11\uff12\uff18x128x128"], "--shapes:"),
        (["search", str(spec), "--shapes", "", "-o", "out"], "--shapes: no shapes"),
        (["search", str(spec), "--shard", "", "-o", "out"], "--shard:"),
        (["campaign", str(spec), "--shape", "", "-o", "out"], "--shape: no shapes"),
        (["campaign", str(spec), "--shape", "64x64x64,128x128x128", "-o", "out"], "--shape: 2 shapes given"),
        (["campaign", str(spec), "--shard", "", "-o", "out"], "--shard:"),
    ]
    for argv, words in cases:
        rc, cap = _run(capsys, *argv)
        assert rc == 2 and words in cap.err, (argv, cap.err)
        assert not (tmp_path / "out").exists(), argv


def test_search_without_a_gpu_builds_the_budgeted_selection(tmp_path, capsys, monkeypatch):
    """Without a GPU, search generates and builds what it would evaluate: the --budget / --strategy selection."""
    import ftgen.bench
    import ftgen.cli as cli
    from ftgen.build import BuildResult, load_manifest
    from ftgen.errors import NoGpuError

    def no_gpu(*a, **k):
        raise NoGpuError("no CUDA GPU on this machine")

    built = []
    monkeypatch.setattr(ftgen.bench, "gpu_info", no_gpu)
    monkeypatch.setattr(cli, "_run_build", lambda project, *a: built.append(project) or BuildResult())
    spec = write(tmp_path / "b.yaml", SMALL.replace("m_tb: 32", "m_tb: [32, 64]").replace("stages: 2}", "stages: [2, 3]}"))
    chosen = {}
    for strategy, budget in (("exhaustive", "1"), ("random", "3")):
        out = tmp_path / strategy
        rc, cap = _run(capsys, "search", str(spec), "--budget", budget, "--strategy", strategy, "-o", str(out))
        assert rc == 4, cap.err
        chosen[strategy] = [v["kernel"] for v in load_manifest(built[-1])["variants"]]
        assert len(chosen[strategy]) == int(budget) and f"{budget} of 4 variant(s)" in cap.err, (chosen, cap.err)
    assert chosen["exhaustive"] == ["gemm_f32_none_32x32x8_w16x32_t4x4_s2"]  # the first of the space


def test_compare_refuses_a_nan_threshold_and_names_a_bad_gzip_file(tmp_path, capsys):
    row = json.dumps({"kernel": "k", "shape": {"m": 1, "n": 1, "k": 1}, "ms": {"median": 1.0}}) + "\n"
    good = write(tmp_path / "a.jsonl", row)
    fake = write(tmp_path / "b.jsonl.gz", "not gzip\n")
    rc, cap = _run(capsys, "compare", str(good), str(good), "--threshold", "nan")
    assert rc == 2 and "--threshold: nan" in cap.err, cap.err
    rc, cap = _run(capsys, "compare", str(good), str(fake))
    assert rc == 2 and f"{fake}: not a readable gzip file" in cap.err, cap.err
