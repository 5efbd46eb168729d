"""Bad inputs to the training-owned modules: ``icl_book.attention``, ``train``, ``studies``.

One test per class of reproducer the probe suite (``tests/test_probe_inputs.py``) found there; each
failed before the fix (a hang or an allocation error, an ``AttributeError``, a silent NaN or complex
answer, or a message that did not name the argument). Valid calls are unchanged: bitwise, compared
against the code before the fix on the same machine (a one-off comparison; here the training
equivalences of ``tests/test_train_batched.py`` and the shipped study's tests keep that).
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest
import torch

from icl_book import studies, tasks, train
from icl_book.attention import deep, glu, layers, lsa
from icl_book.limits import CostRefused

HUGE = 10**12
XS, YS, XQ = (
    np.asarray(a) for a in tasks.sample_linear_prompts(3, 5, 2, rng=np.random.default_rng(0))[:3]
)


def _gen():
    return torch.Generator().manual_seed(0)


def _bad(value, how):
    """``value`` spoilt in one way: a NaN entry, a complex, boolean or string array."""
    arr = np.array(value, dtype=float)
    if how == "nan":
        arr.flat[0] = np.nan
        return arr
    if how == "inf":
        arr.flat[0] = np.inf
        return arr
    return {"complex": arr + 1j, "bool": arr > 0, "str": arr.astype(str)}[how]


SPOILS = ["nan", "inf", "complex", "bool", "str"]


# --- sizes: refused at once, by name, before anything is allocated ---------------------------------
@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: lsa.LinearSelfAttention(HUGE, generator=_gen()), "dim"),
        (lambda: lsa.gd_lsa_weights(HUGE, 0.5), "dim"),
        (lambda: glu.GLUFeedForward(HUGE, 3, generator=_gen()), "embed_dim"),
        (lambda: glu.GLUFeedForward(4, HUGE, generator=_gen()), "hidden_dim"),
        (lambda: glu.TransformerBlock(2, HUGE, 3, generator=_gen()), "n_scratch"),
        (lambda: glu.TransformerBlock(2, 1, HUGE, generator=_gen()), "hidden_dim"),
        (lambda: glu.quadratic_feature_pairs(HUGE), "dim"),
        (lambda: glu.glu_lsa_block_weights(HUGE, 0.5), "dim"),
        (lambda: glu.glu_embed_prompts(XS, YS, XQ, HUGE), "n_scratch"),
        (lambda: layers.embed(XS, YS, XQ, n_scratch=HUGE), "n_scratch"),
        (lambda: deep.DeepTransformer(HUGE, 6, 2, generator=_gen()), "dim"),
        (lambda: deep.DeepTransformer(2, HUGE, 2, generator=_gen()), "width"),
        (lambda: deep.DeepTransformer(2, 6, HUGE, generator=_gen()), "depth"),
        (lambda: deep.DeepTransformer(2, 6, 2, hidden_dim=HUGE, generator=_gen()), "hidden_dim"),
        (lambda: deep.LearnedBCD(2, 2, 7, HUGE), "depth"),
        (
            lambda: studies.build_model(
                studies.RunSpec("block", "quadratic", 5, 0, 0.01, n_scratch=HUGE)
            ),
            "n_scratch",
        ),
        (
            lambda: studies.build_model(
                studies.RunSpec("block", "quadratic", 5, 0, 0.01, hidden=HUGE)
            ),
            "hidden",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_huge_sizes_are_refused_before_allocating(make, name):
    start = time.perf_counter()
    with pytest.raises(ValueError, match=name):
        make()
    assert time.perf_counter() - start < 2.0  # no hang, no attempt to allocate


def test_huge_batch_size_is_refused_by_name():
    model = lsa.LinearSelfAttention(2, generator=_gen())
    with pytest.raises(ValueError, match="batch_size"):
        train.train_in_context(
            model,
            lambda r, b: tasks.sample_linear_prompts(b, 5, 2, rng=r),
            steps=1,
            lr=0.01,
            seed=0,
            batch_size=HUGE,
            progress=False,
        )
    member = train.Member("m", model, lambda r, b: None, 0, 0.01, batch_size=HUGE)
    with pytest.raises(ValueError, match="batch_size"):
        train.BatchedTrainer([member], batch_size=4)


# --- costs: a run that cannot finish is refused at once, by its declared cost ------------------------
class _Started(Exception):
    """Raised by a sampler or a cohort trainer: the work began."""


def _sampler_that_must_not_run(rng, b):
    raise _Started


def test_a_billion_steps_are_refused_before_the_first_step():
    """``train_in_context(steps=10**9)`` once allocated 7.45 GiB before its first step; with its
    history grown as it trains it would run for days. Its cost refuses it at once, naming steps and
    how to raise the budget."""
    model = lsa.LinearSelfAttention(2, generator=_gen())
    start = time.perf_counter()
    with pytest.raises(CostRefused, match=r"steps = 1000000000.*budget\(operations="):
        train.train_in_context(
            model, _sampler_that_must_not_run, steps=10**9, lr=0.01, seed=0, batch_size=4
        )
    assert time.perf_counter() - start < 1.0
    # the book's longest call (chapter 2: 600 steps of 1,024 prompts) is within the budget
    decl = train.train_in_context.__declaration__
    decl.cost.check("train_in_context", {"steps": 600, "batch_size": 1024})


def test_a_seed_torch_cannot_take_is_refused_by_name():
    """``seed=10**30`` reached ``torch.manual_seed``: "Overflow when unpacking long long"."""
    model = lsa.LinearSelfAttention(2, generator=_gen())
    for bad in (10**30, 2**64):
        with pytest.raises(
            ValueError, match=r"seed must be an integer >= 0 and <= 18446744073709551615,"
        ):
            train.train_in_context(
                model, _sampler_that_must_not_run, steps=1, lr=0.01, seed=bad, batch_size=4
            )


def test_a_trainer_whose_every_step_exceeds_the_budget_is_refused():
    """200 members of 50,000 prompts each: every step at least 1e10 operations (10 s)."""
    model = lsa.LinearSelfAttention(2, generator=_gen())
    members = [
        train.Member(f"m{i}", model, _sampler_that_must_not_run, i, 0.01) for i in range(200)
    ]
    with pytest.raises(CostRefused, match="members = .*batch_size = 50000"):
        train.BatchedTrainer(members, batch_size=50_000)
    train.BatchedTrainer(members[:2], batch_size=50_000)  # two members: within the budget


def test_a_study_bound_no_run_can_reach_is_refused_before_training(monkeypatch, tmp_path):
    """``max_steps = 1000 · 2^40`` is a valid doubling of the glu study's first check, and each
    cohort would start training towards it; its loss history alone (36 bytes per step and run)
    is beyond the budget, so the call is refused before any cohort starts."""

    def started(*args, **kwargs):
        raise _Started

    monkeypatch.setattr(studies, "train_cohort", started)
    start = time.perf_counter()
    with pytest.raises(CostRefused, match=r"max_steps = 1099511627776000.*budget\(bytes="):
        studies.train_study("glu", checkpoints=tmp_path, max_steps=1000 * 2**40, log=None)
    assert time.perf_counter() - start < 1.0
    with pytest.raises(_Started):  # the study at its own bounds starts
        studies.train_study("glu", checkpoints=tmp_path, log=None)


# --- the NumPy layers and their column views: arrays are real and finite, shapes match ---------------
_TOK = layers.embed(XS, YS, XQ, n_scratch=0, constant=False)  # (3, 6, 3)
_W = 0.1 * np.ones((3, 3))
_LAYER_CALLS = {
    "layers.lsa(z)": (lambda v: layers.lsa(v, _W, _W), _TOK, "z"),
    "layers.lsa(w_kq)": (lambda v: layers.lsa(_TOK, v, _W), _W, "w_kq"),
    "layers.glu(w3)": (
        lambda v: layers.glu(_TOK, np.ones((2, 3)), np.ones((2, 3)), v),
        np.ones((3, 2)),
        "w3",
    ),
    "layers.readout(z)": (layers.readout, _TOK, "z"),
    "layers.embed(ys)": (lambda v: layers.embed(XS, v, XQ), YS, "ys"),
    "layers.bcd_steps(r)": (lambda v: layers.bcd_steps(v, np.zeros(3), []), YS, "r"),
    "lsa_update(z)": (lambda v: lsa.lsa_update(v, _W, _W), _TOK.swapaxes(1, 2), "z"),
    "lsa_update(w_pv)": (lambda v: lsa.lsa_update(_TOK.swapaxes(1, 2), _W, v), _W, "w_pv"),
    "glu_update(w1)": (
        lambda v: glu.glu_update(_TOK.swapaxes(1, 2), v, np.ones((2, 3)), np.ones((3, 2))),
        np.ones((2, 3)),
        "w1",
    ),
    "layers.lsa(w_kq) on tensors": (
        lambda v: layers.lsa(torch.as_tensor(_TOK), v, torch.as_tensor(_W)),
        _W,
        "w_kq",
    ),
    "lsa_query_readout(w_pv_y)": (
        lambda v: lsa.lsa_query_readout(
            torch.as_tensor(_TOK[:, :-1]), torch.as_tensor(_TOK[:, -1]), torch.as_tensor(_W), v
        ),
        _W[0],
        "w_pv_y",
    ),
}


@pytest.mark.parametrize("how", SPOILS)
@pytest.mark.parametrize("call", sorted(_LAYER_CALLS))
def test_layer_functions_refuse_bad_arrays(call, how):
    func, valid, name = _LAYER_CALLS[call]
    func(valid)  # the valid call runs
    with pytest.raises((TypeError, ValueError), match=name):
        func(_bad(valid, how))


@pytest.mark.parametrize("call", sorted(_LAYER_CALLS))
def test_layer_functions_refuse_none_and_wrong_shapes(call):
    func, valid, name = _LAYER_CALLS[call]
    with pytest.raises((TypeError, ValueError), match=name):
        func(None)
    with pytest.raises((TypeError, ValueError), match=name):
        func(np.asarray(valid)[:-1] if np.ndim(valid) == 1 else np.zeros((0,) * np.ndim(valid)))


def test_lsa_n_queries_on_tensors_is_an_integer_in_range():
    z = torch.as_tensor(_TOK)
    for bad in (True, 2.5, -3, HUGE, None):
        with pytest.raises((TypeError, ValueError), match="n_queries"):
            layers.lsa(z, torch.as_tensor(_W), torch.as_tensor(_W), n_queries=bad)


# --- torch forward passes: complex, NaN, bool and string inputs are refused --------------------------
_MODELS = {
    "LinearSelfAttention": lambda: lsa.LinearSelfAttention(2, generator=_gen()),
    "TransformerBlock": lambda: glu.TransformerBlock(2, 1, 3, generator=_gen()),
    "DeepTransformer": lambda: deep.DeepTransformer(2, 6, 2, generator=_gen()),
    "DeepTransformer(label_norm)": lambda: deep.DeepTransformer(
        2, 6, 2, label_norm=True, generator=_gen()
    ),
    "LearnedBCD": lambda: deep.LearnedBCD(2, 2, 7, 2),
}


@pytest.mark.parametrize("how", SPOILS)
@pytest.mark.parametrize("arg", ["xs", "ys", "x_query"])
@pytest.mark.parametrize("model", sorted(_MODELS))
def test_forward_refuses_bad_inputs(model, arg, how):
    m = _MODELS[model]()
    args = {"xs": XS, "ys": YS, "x_query": XQ}
    assert torch.isfinite(m(**args)).all()
    with pytest.raises((TypeError, ValueError), match=arg):
        m(**{**args, arg: _bad(args[arg], how)})
    with pytest.raises((TypeError, ValueError), match=arg):
        m(**{**args, arg: None})


@pytest.mark.parametrize("how", SPOILS)
def test_glu_feed_forward_refuses_bad_tokens_and_converts_dtypes(how):
    layer = glu.GLUFeedForward(4, 3, generator=_gen(), dtype=torch.float32)
    e = torch.ones(2, 3, 4, dtype=torch.float64)
    assert layer(e).dtype == torch.float32  # a float64 input meets a float32 layer: converted
    with pytest.raises((TypeError, ValueError), match="e "):
        layer(_bad(e.numpy(), how))


def test_batched_lsa_under_vmap_equals_one_at_a_time():
    """chunk_size > 1 runs the models under vmap, where the forward pass's input checks cannot run:
    the trainer validates each batch once and the models skip them (this raised a RuntimeError)."""

    def sampler(rng, b):
        return tasks.sample_linear_prompts(b, 5, 2, rng=rng)

    def trainer(chunk):
        ms = [
            train.Member(
                f"m{i}",
                lsa.LinearSelfAttention(2, generator=torch.Generator().manual_seed(i)),
                sampler,
                i,
                0.01,
            )
            for i in range(2)
        ]
        return train.BatchedTrainer(ms, batch_size=8, chunk_size=chunk)

    one, two = trainer(1), trainer(2)
    for _ in range(3):
        np.testing.assert_allclose(one.step(), two.step(), rtol=1e-12)


# --- flags and structured weights -----------------------------------------------------------------
@pytest.mark.parametrize("bad", [None, "False", 2])
def test_flags_are_booleans(bad):
    with pytest.raises(TypeError, match="constant"):
        glu.glu_token_layout(2, 1, constant=bad)
    with pytest.raises(TypeError, match="constant"):
        glu.glu_embed_prompts(XS, YS, XQ, 3, constant=bad)
    w = glu.glu_lsa_block_weights(2, 0.5)
    tokens = glu.glu_embed_prompts(XS, YS, XQ, 3)
    with pytest.raises(TypeError, match="constant"):
        glu.glu_lsa_block_forward(tokens, w._replace(constant=bad))
    with pytest.raises(TypeError, match="zero_init_residual"):
        deep.DeepTransformer(2, 6, 2, zero_init_residual=bad, generator=_gen())


_DEEP = deep.deep_bcd_weights(2, 2, 6, 0.3)


@pytest.mark.parametrize(
    "field, bad",
    [
        ("layers", None),
        ("layers", 3.0),
        ("feature_blocks", "1"),
        ("schedule", None),
        ("degree", 2.5),
        ("degree", -3),
        ("width", None),
        ("width", True),
        ("width", HUGE),
        ("eta", float("nan")),
        ("eta", 1j),
        ("n_cycles", 0),
        ("kind", "nope"),
    ],
)
def test_deep_bcd_weights_fields_are_validated(field, bad):
    with pytest.raises((TypeError, ValueError), match=field):
        dataclasses.replace(_DEEP, **{field: bad})


def test_deep_forward_layers_must_be_a_sequence():
    tokens = glu.glu_embed_prompts(XS, YS, XQ, 3)
    for bad in (None, 3.0):
        with pytest.raises(TypeError, match="layers"):
            deep.deep_forward(tokens, bad)


# --- studies ---------------------------------------------------------------------------------------
_RUN = studies.cohorts("glu")[0].runs[0]
_COHORT = studies.Cohort(
    "probe", (_RUN,), 4, 0, 1.0, first_check=2, max_steps=4, val_size=8, val_seed=1
)


@pytest.mark.parametrize(
    "field, bad",
    [
        ("model", "nope"),
        ("task", None),
        ("init", True),
        ("context_len", 2.5),
        ("seed", -3),
        ("lr", float("nan")),
        ("lr", "1"),
        ("depth", 0),
        ("dim", None),
        ("batch_size", True),
    ],
)
def test_run_spec_fields_are_validated(field, bad):
    with pytest.raises((TypeError, ValueError), match=field):
        dataclasses.replace(_RUN, **{field: bad})


@pytest.mark.parametrize(
    "field, bad",
    [
        ("name", None),
        ("name", ""),
        ("runs", "1"),
        ("runs", None),
        ("batch_size", 0),
        ("first_check", 2.5),
        ("max_steps", None),
        ("val_size", float("nan")),
        ("val_seed", -3),
        ("dtype", "nope"),
        ("dtype", None),
    ],
)
def test_cohort_fields_are_validated(field, bad):
    with pytest.raises((TypeError, ValueError), match=field):
        dataclasses.replace(_COHORT, **{field: bad})


def test_every_study_and_the_shipped_file_still_validate():
    for study in studies.STUDIES:
        for cohort in studies.cohorts(study):
            dataclasses.replace(cohort)  # re-runs the validation of the cohort and its runs
    assert studies.load_study("glu")


@pytest.mark.parametrize("bad", [None, "1", 3.0])
def test_study_functions_name_a_wrong_argument(bad):
    calls = {
        "run": [
            lambda: studies.build_model(bad),
            lambda: studies.make_sampler(bad),
            lambda: studies.validation_prompts(_COHORT, bad),
        ],
        "cohort": [
            lambda: studies.members(bad),
            lambda: studies.study_trainer(bad),
            lambda: studies.validation_prompts(bad, _RUN),
        ],
        "runs": [lambda: studies.select_runs(bad, model="block")],
        "records": [lambda: studies.study_arrays(_COHORT, studies.study_trainer(_COHORT), bad)],
        "trainer": [lambda: studies.study_arrays(_COHORT, bad, {})],
    }
    for name, funcs in calls.items():
        for func in funcs:
            with pytest.raises(TypeError, match=name):
                func()
    with pytest.raises((TypeError, ValueError), match="context_len"):
        studies.make_sampler(_RUN, 2.5)
    if bad is not None and not isinstance(bad, str):
        with pytest.raises(TypeError, match="path"):
            studies.load_study("glu", path=bad)


# --- train -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "val_mse, change_se, name",
    [
        (None, [np.nan, 0.1], "val_mse"),
        ("1", [np.nan, 0.1], "val_mse"),
        ([1.0, np.nan], [np.nan, 0.1], "val_mse"),
        ([1.0, 0.9 + 1j], [np.nan, 0.1], "val_mse"),
        ([1.0, 0.9], None, "change_se"),
        ([1.0, 0.9], [np.nan, np.inf], "change_se"),
        ([1.0, 0.9], ["a", "b"], "change_se"),
        ([1.0, 0.9], [[0.1]], "change_se"),
    ],
)
def test_converged_at_validates(val_mse, change_se, name):
    with pytest.raises((TypeError, ValueError), match=name):
        train.converged_at(val_mse, change_se)


def test_converged_at_answers_a_boolean():
    assert train.converged_at([1.0, 0.96, 0.95], [np.nan, 0.06, 0.06]) is True
    assert train.converged_at([1.0, 0.95], [np.nan, 0.06]) is False  # one doubling is not enough
    assert train.converged_at([1.0], [np.nan]) is False
    with pytest.raises(ValueError, match="change_se must have one entry per checkpoint"):
        train.converged_at([1.0, 0.9], [])


def _sampler(rng, b):
    return tasks.sample_linear_prompts(b, 5, 2, rng=rng)


def test_member_name_and_model_are_checked():
    model = lsa.LinearSelfAttention(2, generator=_gen())
    for bad in (None, 3, ""):
        with pytest.raises(TypeError, match="name"):
            train.Member(bad, model, _sampler, 0, 0.01)
    for bad in (None, "1", 3.0):
        with pytest.raises(TypeError, match="model"):
            train.Member("m", bad, _sampler, 0, 0.01)


@pytest.mark.parametrize(
    "field, bad",
    [
        ("sample_prompts", 3.0),
        ("seed", -1),
        ("seed", 2.0),
        ("lr", 0.0),
        ("lr", float("nan")),
        ("warmup", -1),
        ("batch_size", 0),
        ("batch_size", True),
        ("decay_start", 1.5),
    ],
)
def test_member_validates_every_field(field, bad):
    """Every field, so Member is honestly undeclared (a frozen dataclass that checks its fields);
    the trainer checked these only when it was built, naming the member."""
    member = train.Member("m", lsa.LinearSelfAttention(2, generator=_gen()), _sampler, 0, 0.01)
    with pytest.raises((TypeError, ValueError), match=field):
        dataclasses.replace(member, **{field: bad})


@pytest.mark.parametrize("returned", [None, np.full(3, np.nan)])
def test_a_sampler_returning_no_prompts_is_named(returned):
    model = lsa.LinearSelfAttention(2, generator=_gen())
    trainer = train.BatchedTrainer(
        [train.Member("m", model, lambda r, b: returned, 0, 0.01)], batch_size=4
    )
    with pytest.raises(TypeError, match="sample_prompts"):
        trainer.step()
    with pytest.raises(TypeError, match="sample_prompts"):
        train.train_in_context(
            model, lambda r, b: returned, steps=1, lr=0.01, seed=0, batch_size=4, progress=False
        )


def test_trainer_arguments_are_named():
    member = train.Member("m", lsa.LinearSelfAttention(2, generator=_gen()), _sampler, 0, 0.01)
    for bad in (None, 3.0):
        with pytest.raises(TypeError, match="members"):
            train.BatchedTrainer(bad, batch_size=4)
    with pytest.raises(ValueError, match="device"):
        train.BatchedTrainer([member], batch_size=4, device="nope")
    prompts = _sampler(np.random.default_rng(0), 4)
    with pytest.raises(ValueError, match="device"):
        train.prompts_to_torch(prompts, device="nope")
    trainer = train.BatchedTrainer([member], batch_size=4)
    for bad in (None, 3.0):
        with pytest.raises(TypeError, match="val_prompts"):
            train.train_to_convergence(trainer, bad, first_check=2, max_steps=4)


def test_public_layers_still_run_under_vmap():
    """The layers promise ``torch.func.vmap`` (one prompt, batched): their checks keep to dtypes and
    shapes there, where a data-dependent check cannot run."""
    from torch.func import vmap

    z = torch.as_tensor(_TOK)
    w = torch.as_tensor(_W)
    assert torch.equal(vmap(lambda t: layers.lsa(t, w, -w))(z), layers.lsa(z, w, -w))
    assert torch.equal(vmap(layers.readout)(z), layers.readout(z))
