"""On a CUDA machine: one full-configuration training step of every recordable, and the random-trigger evaluator
(the pair discounts and their edits, Birth of a Transformer Section 4.2) on the GPU agreeing with the CPU.

Skipped where no CUDA device is present (CI); ``benchmarks/gpu_session.sh`` runs this module first on a lent GPU,
so that a device error shows there in seconds, not after a recording's first minutes.
"""

import dataclasses

import numpy as np
import pytest
import torch

from companion import record
from companion.experiments import fact_capacity, induction, khop, khop_members

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def few_steps(exp, steps: int = 2):
    """``exp`` trained ``steps`` steps (and pre-trained as many, where it pre-trains), evaluated at every step;
    an experiment counted in epochs (the leading-terms text study), one epoch."""
    fields = {f.name for f in dataclasses.fields(exp)}
    over = {"steps": steps, "eval_every": 1, "pretrain_steps": steps, "last": 1, "epochs": 1}
    return dataclasses.replace(exp, **{k: v for k, v in over.items() if k in fields})


def first_member(name: str):
    """The first configuration of recordable ``name`` at the full profile, or at quick for the recordables that
    exist only there (their budgets come from a quick recording)."""
    rec = record.experiment(name)
    try:
        members = rec.members("full")
    except ValueError:
        members = rec.members("quick")
    return rec, next(iter(members.values()))


@pytest.mark.parametrize("name", record.EXPERIMENTS)
def test_a_full_configuration_of_every_recordable_trains_on_cuda(name, tmp_path, monkeypatch):
    if name.startswith("theory_"):
        pytest.skip("the theorem chapters' Monte Carlo runs with numpy on the CPU, whatever the device")
    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(khop, "ESCAPE_STEPS", 1)  # each continuation of the stalled run: one step per unit
    rec, exp = first_member(name)
    run = rec.runner(exp)
    if name == "khop_stage_entry":  # the run trains, then the study refuses it: two steps never reach k hops
        with pytest.raises(ValueError, match="its last stage starts at step inf"):
            run(few_steps(exp), device="cuda", progress=False)
        return
    assert run(few_steps(exp), device="cuda", progress=False) is not None


def test_the_random_trigger_evaluator_agrees_on_cpu_and_cuda():
    """The evaluator of a random-trigger two-layer model (its pair discounts and the edited models' shares,
    built from the model being trained) gives the same row on both devices (``record induction_random_seeds``
    failed on CUDA with a device mismatch in ``discount_edit``)."""
    exp = few_steps(induction.random_trigger_experiment("quick"))
    model = induction.run(exp, device="cpu", progress=False, use_cache=False).model()
    rows = {
        dev: induction.Evaluator(exp, model.to(dev).eval(), torch.device(dev))(exp.steps)
        for dev in ("cpu", "cuda")
    }
    assert any(k.startswith("random_") for k in rows["cpu"])
    assert rows["cpu"].keys() == rows["cuda"].keys()
    for k, v in rows["cpu"].items():
        # shares of argmax predictions may move by a position or two where the devices round a near tie apart
        share = k.startswith(("acc", "random_top1_"))
        assert rows["cuda"][k] == pytest.approx(
            v, **({"abs": 0.01} if share else {"rel": 1e-4, "abs": 1e-6})
        ), k


def test_a_full_grid_pack_trains_on_cuda_as_on_the_cpu():
    """Two full-profile grid points of one H as one pack (fact_capacity.run_many's grouping), 3 steps on each
    device in float64: the same evaluations, nothing on the wrong device."""
    torch.set_default_dtype(torch.float64)
    try:
        grid = fact_capacity.grid("full")
        exps = [few_steps(grid[n], 3) for n in ("H=4, m=8", "H=4, m=128")]
        runs = {
            dev: fact_capacity._train_pack(exps, progress=False, device=dev, states=True)
            for dev in ("cpu", "cuda")
        }
    finally:
        torch.set_default_dtype(torch.float32)
    for cpu, cuda in zip(runs["cpu"], runs["cuda"]):
        assert cpu["acc"].tolist() == cuda["acc"].tolist() and cpu["stopped"] == cuda["stopped"] == 3
        for k, v in cpu["state"].items():
            torch.testing.assert_close(cuda["state"][k], v, rtol=1e-9, atol=1e-9)


def test_a_full_khop_pack_trains_on_cuda_as_on_the_cpu():
    """The full chapter's runs of one shape as one pack (khop.run_many's grouping), 3 steps on each device in
    float64 (test sets of 64): the same evaluations and stages, the same weights to 1e-9, nothing on the wrong device."""
    members = khop_members.members("full")
    exps = [dataclasses.replace(few_steps(e, 3), n_test=64) for e in members.values()]
    exps = [e for e in exps if khop.pack_key(e) == khop.pack_key(exps[0])]
    assert len(exps) >= 2
    torch.set_default_dtype(torch.float64)
    try:
        runs = {dev: khop._train_pack(exps, progress=False, device=dev) for dev in ("cpu", "cuda")}
    finally:
        torch.set_default_dtype(torch.float32)
    for cpu, cuda in zip(runs["cpu"], runs["cuda"]):
        assert cpu["acc"].tolist() == cuda["acc"].tolist() and cpu["stage"].tolist() == cuda["stage"].tolist()
        for k, v in cpu["state"].items():
            torch.testing.assert_close(cuda["state"][k], v, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("family", ["factual", "scan_snap"])
def test_the_small_families_train_on_cuda_as_on_the_cpu(family):
    """Factual recall (Fig. 5's run) and Scan and Snap's synthetic replicas, a few steps on each device in
    float64: the same evaluations to 1e-9 (these ran on the CPU only until issue 51)."""
    from companion.experiments import factual, scan_snap

    if family == "factual":
        exp = dataclasses.replace(
            factual.experiments("quick")["S = 16, R = 4 (paper)"], steps=4, eval_every=2
        )
        keys, run = ("loss", "loss_relation", "loss_subject", "acc"), factual.run
    else:
        exp = dataclasses.replace(
            scan_snap.small_experiments("quick")["Adam, eta_Y = eta_Z"], steps=4, record_every=2
        )
        keys, run = ("loss", "c", "entropy"), scan_snap.run
    torch.set_default_dtype(torch.float64)
    try:
        runs = {dev: run(exp, device=dev, progress=False, use_cache=False) for dev in ("cpu", "cuda")}
    finally:
        torch.set_default_dtype(torch.float32)
    assert runs["cuda"]["device"] != runs["cpu"]["device"]
    for k in keys:
        np.testing.assert_allclose(runs["cuda"][k], runs["cpu"][k], rtol=1e-9, atol=1e-9, err_msg=k)


@pytest.mark.parametrize("final_trigger", [True, False])
def test_the_counter_samplers_draw_the_same_tokens_on_cuda_as_on_the_cpu(final_trigger):
    """Issue 54: a batch is a function of (seed, stream, step) on any device, the full Fig. 3 size included."""
    from companion.data.recall import BigramTask, RecallTask

    task = RecallTask(seq_len=256, alpha=0.5, final_trigger=final_trigger, loss_on="triggers", n_triggers=3)
    cpu = task.draw([0, 7], range(3), 512, stream=1)
    gpu = task.draw([0, 7], range(3), 512, stream=1, device="cuda")
    for f in ("tokens", "ybar", "final_ybar", "occurrence", "loss_mask", "triggers"):
        assert torch.equal(getattr(cpu, f), getattr(gpu, f).cpu()), f
    from companion.data import counter, seqclass
    from companion.data.facts import FactTask
    from companion.data.ioi import IOITask
    from companion.data.khop import KHopTask

    others = {
        "ioi": lambda d: IOITask(seq_len=256, alpha=0.5).draw([2], range(2), 256, device=d),
        "facts": lambda d: FactTask(seq_len=32).draw([2], range(2), 256, device=d),
        "khop": lambda d: KHopTask(N=8, k=4).draw(
            [2], range(2), [1, 2, 3, 4] * 32, [1, 1, 2, 1] * 32, device=d
        ),
    }
    sc = seqclass.synthetic(num_last=2, num_next_per_last=2)
    for a, b in zip(
        sc.draw_counts([1], range(2), 64, 32), sc.draw_counts([1], range(2), 64, 32, device="cuda")
    ):
        assert torch.equal(a, b.cpu())
    assert torch.equal(
        counter.orders([3], range(2), 1000), counter.orders([3], range(2), 1000, device="cuda").cpu()
    )
    for name, draw in others.items():
        a, b = draw("cpu"), draw("cuda")
        for f in dataclasses.fields(a):
            if getattr(a, f.name) is not None:
                assert torch.equal(getattr(a, f.name), getattr(b, f.name).cpu()), (name, f.name)
    bigram = BigramTask(seq_len=256)
    assert torch.equal(
        bigram.draw([3], range(2), 64).tokens, bigram.draw([3], range(2), 64, device="cuda").tokens.cpu()
    )


def _small_three_steps():
    from companion.experiments import three_steps

    exp = three_steps.three_step_runs("full")["slide order, orthonormal"]
    return dataclasses.replace(
        exp,
        batch=1024,
        chunk=512,
        line_batch=512,
        n_test=128,
        etas=(1.0, 4.0, 16.0),
        second_step_sizes=(4.0,),
        scales=(5.0,),
    )


@pytest.mark.parametrize("computation", ["three_steps", "leading_theorem", "truncation_search"])
def test_the_full_profile_computations_that_ran_on_the_cpu_agree_on_cuda(computation):
    """Issue 51: the three gradient steps (the full size, on a population of 1024, three step sizes), Theorem 4.1's full-batch GD
    (the full configuration, 16 windows, 4 steps) and Fig. 13's truncation search ran on the CPU whatever the
    device; on CUDA in float64 they give the CPU's numbers to 1e-9 (step sizes and probes equal)."""
    from companion.experiments import summaries, three_steps
    from companion.experiments.noisy_recall import RecallExperiment
    from companion.experiments.noisy_recall import run as recall_run
    from companion.theory import leading_theorem as lth

    torch.set_default_dtype(torch.float64)
    try:
        if computation == "three_steps":
            exp = _small_three_steps()
            out = {
                d: three_steps.three_steps(exp, device=d, progress=False, use_cache=False)
                for d in ("cpu", "cuda")
            }
            pairs = [(a, b) for a, b in zip(out["cpu"]["rows"], out["cuda"]["rows"])] + [
                (out["cpu"]["scales"], out["cuda"]["scales"])
            ]
        elif computation == "leading_theorem":
            cfg = dataclasses.replace(lth.configs("full"), n_seqs=16, steps=4)
            out = {d: lth.theorem_study(cfg, use_cache=False, device=d) for d in ("cpu", "cuda")}
            pairs = [(out["cpu"]["runs"], out["cuda"]["runs"])]
        else:
            exp = RecallExperiment.quick(d=32, seq_len=16, batch=16, steps=20, eval_every=10, n_test=64)
            run = recall_run(exp, progress=False, use_cache=False, device="cpu")
            out = {d: summaries.truncation_searches({"r": run}, device=d)["r"] for d in ("cpu", "cuda")}
            pairs = [({r["candidate"]: r for r in out["cpu"]}, {r["candidate"]: r for r in out["cuda"]})]
    finally:
        torch.set_default_dtype(torch.float32)

    def close(a, b, path):
        if isinstance(a, dict):
            assert set(a) == set(b), path
            for k in a:
                if k not in ("seconds", "device"):
                    close(a[k], b[k], f"{path}/{k}")
        elif isinstance(a, (list, tuple)):
            assert len(a) == len(b), path
            for i, (x, y) in enumerate(zip(a, b)):
                close(x, y, f"{path}[{i}]")
        elif isinstance(a, float):
            np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-9, err_msg=path)
        else:
            assert a == b, path

    for a, b in pairs:
        close(a, b, computation)
