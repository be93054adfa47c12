"""The leading-terms paper: the attention-only model against a literal loop, the corpus statistics against
literal sums of the paper's formulas, and the leading terms against autograd gradients."""

import math

import numpy as np
import pytest
import torch

from companion import report
from companion.models.attn_only import AttnOnly, AttnOnlyConfig
from companion.theory import leading_terms as lt

V, T, N = 9, 6, 40


@pytest.fixture(scope="module")
def seqs():
    rng = np.random.default_rng(0)
    # a Markov chain with a skewed transition matrix, so that every statistic is non-trivial
    P = rng.dirichlet(np.full(V, 0.3), size=V)
    out = np.zeros((N, T + 1), dtype=np.int64)
    out[:, 0] = rng.integers(V, size=N)
    for t in range(T):
        u = rng.random(N)[:, None]
        out[:, t + 1] = (u > P[out[:, t]].cumsum(1)).sum(1).clip(max=V - 1)
    return out


@pytest.fixture(scope="module")
def stats(seqs):
    return lt.statistics(seqs, V)


def loop_forward(model, x):
    """Definition 3.1 written with explicit loops over positions (one sequence)."""
    Tn = len(x)
    h = torch.zeros(Tn, V, dtype=torch.float64)
    h[torch.arange(Tn), x] = 1
    for l in range(model.cfg.L):
        new = h.clone()
        for t in range(Tn):
            s = torch.stack([h[t] @ model.W[l] @ h[m] + model.P[l][t - m] for m in range(t + 1)])
            a = torch.softmax(s, 0)
            new[t] = h[t] + sum(a[m] * (h[m] @ model.Vv[l]) for m in range(t + 1))
        h = new
    return h @ model.W_O


def test_model_matches_loop():
    torch.manual_seed(0)
    cfg = AttnOnlyConfig(V=V, T=T, L=2, init="gaussian", init_std=0.5)
    m = AttnOnly(cfg, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    x = torch.tensor([[3, 1, 4, 1, 5, 8], [2, 7, 1, 8, 2, 8]])
    F = m(x)
    for i in range(2):
        assert torch.allclose(F[i], loop_forward(m, x[i]), atol=1e-12)


def test_statistics_match_literal_sums(seqs, stats):
    x, y = seqs[:, :-1], seqs[:, 1:]
    NT = N * T
    B = np.zeros((V, V))
    for i in range(N):
        for t in range(T):
            B[x[i, t], y[i, t]] += 1 / NT
    B -= B.sum(1, keepdims=True) / V
    assert np.allclose(stats.B.numpy(), B, atol=1e-14)
    assert np.allclose(stats.B.sum(1).numpy(), 0, atol=1e-14)  # rows sum to 0 (Eq. 9)
    # Eq. (11): Phi_ij = (1/T) sum_k (1/k) sum_{m<=k} P(x_{k+1} = e_i, x_m = e_j) - mu_j
    Phi = np.zeros((V, V))
    for k in range(1, T + 1):
        for m in range(1, k + 1):
            for i in range(N):
                Phi[seqs[i, k], seqs[i, m - 1]] += 1 / (T * k * N)
    Phi -= Phi.mean(0, keepdims=True)
    assert np.allclose(stats.Phi.numpy(), Phi, atol=1e-14)
    assert np.allclose(stats.Phi.sum(0).numpy(), 0, atol=1e-14)  # columns centred
    # Eqs. (15)-(17) and (85) with explicit loops
    G = (stats.Sigma @ stats.Phi).numpy()
    Q = np.zeros((V, V))
    D = np.zeros(T)
    for i in range(N):
        Y = np.eye(V)[y[i]] - 1 / V
        X = np.eye(V)[x[i]]
        g = Y @ G @ X.T
        Qi = np.zeros((T, T))
        for t in range(T):
            mean = g[t, : t + 1].mean()
            Qi[t, : t + 1] = (g[t, : t + 1] - mean) / (t + 1)
        Q += X.T @ Qi @ X / NT
        for d in range(T):
            D[d] += np.trace(Qi, offset=-d) / NT
    assert np.allclose(stats.Q.numpy(), Q, atol=1e-15)
    assert np.allclose(stats.Delta.numpy(), D, atol=1e-15)


def grads(model, seqs):
    model.zero_grad()
    model.loss(torch.as_tensor(seqs)).backward()
    return {k: p.grad.clone() for k, p in model.named_parameters()}


@pytest.mark.parametrize("L", [1, 2])
def test_first_step_is_exactly_eta_B(seqs, stats, L):
    m = AttnOnly(AttnOnlyConfig(V=V, T=T, L=L), dtype=torch.float64)
    g = grads(m, seqs)
    eta = 0.3
    assert torch.allclose(-eta * g["W_O"], eta * stats.B, atol=1e-15)  # Lemma D.3 / D.8
    for k in ("W", "Vv", "P"):
        assert g[k].abs().max() == 0


@pytest.mark.parametrize("L", [1, 2])
def test_leading_terms_are_the_small_weight_limit_of_the_gradients(seqs, stats, L):
    """-grad V / a -> Phi^T B^T at W_O = a B; -grad W / (a b) -> Q and -grad P / (a b) -> Delta at
    W_O = a B, V = b Phi^T B^T (every layer), W = P = 0, as a, b -> 0."""
    m = AttnOnly(AttnOnlyConfig(V=V, T=T, L=L), dtype=torch.float64)
    a, b = 1e-4, 1e-4
    with torch.no_grad():
        m.W_O.copy_(a * stats.B)
    g = grads(m, seqs)
    lead_V = stats.leading("V")
    for l in range(L):
        assert lt.cosine(-g["Vv"][l], lead_V) > 1 - 1e-6
        assert torch.allclose(-g["Vv"][l] / a, lead_V, rtol=1e-3, atol=1e-3 * lead_V.abs().max().item())
    with torch.no_grad():
        m.Vv.copy_(b * lead_V.expand(L, V, V))
    g = grads(m, seqs)
    for l in range(L):
        for name, key in (("W", "W"), ("P", "P")):
            lead = stats.leading(name)
            got = -g[key][l] / (a * b)
            assert torch.allclose(got, lead, rtol=1e-3, atol=1e-3 * lead.abs().max().item()), (name, l)


def test_coefficient_is_the_sum_over_steps():
    for s in range(0, 12):
        assert lt.coefficient(s) == sum(k * k * (k - 1) // 2 for k in range(1, s))


@pytest.mark.parametrize("s, eta, T", [(1, 0.005, 200), (4, 0.05, 64), (7, 0.01, 1000)])
def test_bounds_are_the_theorems_as_printed(s, eta, T):
    """The bounds and the steps covered, transcribed here from the paper's Theorem D.6 (Eqs. (88)-(91)) and
    Theorem D.9 = 4.1 (Eqs. (155)-(158)), independently of companion.theory.leading_terms.BOUNDS."""
    printed = {
        "D.6 (one layer)": {"W_O": 3 * s**2 * eta**2, "V": 4 * s**3 * eta**3, "W": 6 * s**5 * eta**5 * T},
        "4.1 / D.9 (L layers)": {
            "W_O": 3 * s**2 * eta**2,
            "V": 12 * s**3 * eta**3,
            "W": 13 * s**5 * eta**5 * T,
        },
    }
    for theorem, weights in printed.items():
        for name, value in {**weights, "P": weights["W"]}.items():
            assert math.isclose(lt.bound(name, s, eta, T, theorem), value, rel_tol=1e-12), (theorem, name)
    for L in (1, 2, 3):
        covered = lt.max_steps(eta, T, L)
        assert math.isclose(covered["4.1 / D.9 (L layers)"], min(1 / (12 * L), 5 / (8 * math.sqrt(T))) / eta)
        assert covered["D.6 (one layer)"] == (3 / (8 * T ** (3 / 8)) / eta if L == 1 else 0.0)
        assert covered["4.1 / D.9 conditions met"] == (T >= 60 and L <= math.sqrt(T) / 4)


def test_softmax_jacobian_lemma():
    """Lemma D.2's 1/sqrt(i) holds at the uniform distribution (norm 1/i) but not in general:
    a two-point distribution has norm 1/2."""
    for i in (2, 5, 50):
        assert math.isclose(lt.softmax_jacobian_norm(torch.zeros(i)).item(), 1 / i, rel_tol=1e-12)
        z = torch.full((i,), -60.0)
        z[:2] = 0
        assert math.isclose(lt.softmax_jacobian_norm(z).item(), 0.5, rel_tol=1e-9)


def test_bad_input():
    with pytest.raises(ValueError, match="L=0"):
        AttnOnlyConfig(L=0)
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 8\]"):
        lt.statistics(np.array([[0, 9, 1]]), V)
    with pytest.raises(ValueError, match="weight"):
        lt.leading_scale("Z", 3, 0.1)


def test_corpus_bad_input_and_filter():
    from companion.data import wordcorpus as wc

    docs = ["the cat sat . the dog sat .", "a b"]
    with pytest.raises(ValueError, match="vocab_size=50 is larger than the corpus supports"):
        wc.build(wc.CorpusConfig(vocab_size=50, T=2), docs=docs)
    with pytest.raises(ValueError, match="T=40 leaves no sample"):
        wc.build(wc.CorpusConfig(vocab_size=5, T=40), docs=docs)
    with pytest.raises(ValueError, match="unknown oov"):
        wc.CorpusConfig(oov="drop")
    # the paper's filter: documents with an out-of-vocabulary token or fewer than T + 1 tokens are dropped
    c = wc.build(wc.CorpusConfig(vocab_size=5, T=3, oov="filter"), docs=docs + ["the cat sat the"])
    assert [[c.itos[i] for i in row] for row in c.tokens] == [["the", "cat", "sat", "the"]]
    assert c.oov_fraction == 0.0


def test_study_configs_refuse_bad_values():
    from companion.theory import leading_study as ls

    with pytest.raises(ValueError, match="L=0"):
        ls.TextConfig(L=0)
    with pytest.raises(ValueError, match="batch=5000"):
        ls.TextConfig(batch=5000)
    with pytest.raises(ValueError, match="stats_from"):
        ls.TextConfig(stats_from="second_batch")


def test_wikitext_markers_become_unk():
    from companion.data import wordcorpus as wc

    text = wc._clean_wikitext(" the <unk> river , 1 @,@ 000 m @-@ long ")
    c = wc.build(wc.CorpusConfig(vocab_size=4, T=2), docs=[text + text])
    assert "<unk>" in c.itos and "unk" not in c.itos and "@" not in c.itos


def test_leading_probe_on_a_tiny_neox():
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    from companion.llm import leading_probe as lp

    torch.manual_seed(0)
    cfg = GPTNeoXConfig(
        vocab_size=40,
        hidden_size=16,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    model = GPTNeoXForCausalLM(cfg).eval()
    with torch.no_grad():  # non-trivial LayerNorms and biases
        for layer in model.gpt_neox.layers:
            layer.input_layernorm.weight.uniform_(0.5, 1.5)
            layer.input_layernorm.bias.normal_(0, 0.1)
            layer.attention.query_key_value.bias.normal_(0, 0.5)
    checks = lp.pipeline_checks(model, np.arange(40))
    assert checks["hook_error"] < 1e-5 and checks["qk_error"] < 1e-5
    report.require(report.Summary(checks), lp.PIPELINE)  # the chapter's bounds
    emb = lp.token_embeddings(model, np.arange(40), batch=7)
    assert emb["pre"].shape == (3, 40, 16)
    # the layer output is its input plus attention plus the MLP of the (parallel) residual
    layer = model.gpt_neox.layers[1]
    with torch.no_grad():
        mlp = layer.mlp(layer.post_attention_layernorm(torch.as_tensor(emb["pre"][1]))).numpy()
    assert np.allclose(emb["post"][1], emb["attn"][1] + mlp, atol=1e-5)
    # one head's A_emb differs from the mean; a wrong layout (k before q) would transpose it
    assert not torch.allclose(lp.key_query(model, 0, 0), lp.key_query(model, 0, 0).T)
    ids = np.random.default_rng(0).integers(0, 40, size=5000)
    top = lp.top_tokens(ids, 12)
    feats = lp.leading_features(ids, top, T=9)
    assert feats["Q"].shape == (12, 12) and feats["V"].shape == (12, 12)
    out = lp.compare(model, feats, top, heads=True)
    assert len(out["attention"]) == 3 and len(out["heads"][0]) == 4
    assert all(-1 <= c <= 1 for c in out["attention"] + out["embedding"])
    # the authors' orientation compares with Q-bar^T: the same numbers for a symmetric Q-bar, others here
    A = lp.attention_tokens(model, 1, emb["pre"][1][top])
    assert out["attention_authors"][1] == pytest.approx(lp.cov_cosine(A, lp.row_normalised(feats["Q"].T)))
    sym = {"Q": feats["Q"] + feats["Q"].T, "V": feats["V"]}
    again = lp.compare(model, sym, top)
    assert np.allclose(again["attention"], again["attention_authors"])
    ceil = lp.orientation_ceilings(feats)
    assert ceil["ours"] == pytest.approx(1.0) and ceil["authors"] < 1
    assert ceil["unnormalised"] == pytest.approx(lp.cov_cosine(feats["Q"], lp.row_normalised(feats["Q"])))
    assert lp.orientation_ceilings(sym)["authors"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="k=41 is larger"):
        lp.top_tokens(ids, 41)


def test_leading_probe_check_catches_a_transposed_key_query(monkeypatch):
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    from companion.llm import leading_probe as lp

    torch.manual_seed(1)
    model = GPTNeoXForCausalLM(
        GPTNeoXConfig(
            vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32
        )
    ).eval()
    right = lp.key_query
    monkeypatch.setattr(lp, "key_query", lambda m, layer, head=None: right(m, layer, head).T)
    assert lp.pipeline_checks(model, np.arange(30))["qk_error"] > 1e-2


def test_stand_in_too_small_for_the_configuration_is_resized():
    from companion.data import wordcorpus as wc
    from companion.theory import leading_study as ls

    corpus = wc.build(wc.CorpusConfig(vocab_size=5, T=2), docs=["a b c d e f g h i j " * 30])
    cfg = ls.TextConfig(n_train=2048, n_heldout=512, batch=64)
    fitted = ls.fit_to(cfg, corpus, standin=True)
    assert (
        fitted.n_train + fitted.n_heldout == len(corpus.tokens)
        and fitted.n_heldout == len(corpus.tokens) // 8
    )
    assert ls.fit_to(cfg, corpus, standin=False) == cfg  # the paper's corpus is never resized ...
    with pytest.raises(ValueError, match="n_train \\+ n_heldout = 2560 is more than"):
        ls._split(corpus, cfg)  # ... it is refused


def test_text_study_first_batch_is_what_sgd_trains_on_first(monkeypatch):
    """A spy on the model's loss with gradients on: the first training batch is the study's ``first_batch``
    (which is also the batch the paper's code takes its statistics from)."""
    import dataclasses

    from companion.data import sources
    from companion.theory import leading_study as ls

    if not sources.available("wikitext2_valid"):
        pytest.skip("WikiText-2 not in COMPANION_DATA_DIR")
    cfg = dataclasses.replace(ls.configs("quick")["text"], epochs=1, rates=(0.005,))
    seen = []
    original = AttnOnly.loss

    def spy(self, seqs):
        if torch.is_grad_enabled():
            seen.append(seqs.clone())
        return original(self, seqs)

    monkeypatch.setattr(AttnOnly, "loss", spy)
    res = ls.text_study(cfg, use_cache=False, progress=False, device="cpu")
    first = ls.first_batch(cfg)["x"]
    assert len(seen) == cfg.n_train // cfg.batch and np.array_equal(seen[0].numpy(), first)
    assert res["device"].startswith("CPU") and res["seconds"] > 0
    assert "wikitext2 in place of the paper's tinystories" in ls.stand_in({"text": cfg})


def test_eq10_as_printed_is_the_uncentred_gram_matrix():
    """Eq. (10) transcribed with loops over the tokens and the sequences (relative frequencies counted one by
    one) equals lt.sigma_as_printed; eq10_check compares it with statistics' Sigma = B^T B, which the centring
    of Eq. (9) keeps apart from it."""
    rng = np.random.default_rng(4)
    V = 5
    seqs = rng.integers(0, V, (6, 9))
    freq = np.bincount(seqs.ravel(), minlength=V) / seqs.size
    ends = np.zeros((V, V))  # ends[i, k]: bigrams (k, i), previous token k, current token i
    for row in seqs:
        for k, i in zip(row[:-1], row[1:]):
            ends[i, k] += 1
    prev = ends / np.maximum(ends.sum(1, keepdims=True), 1)  # row i: P(e_k^<- | e_i)
    literal = np.array(
        [
            [freq[i] * freq[j] * sum(prev[i, k] * prev[j, k] for k in range(V)) for j in range(V)]
            for i in range(V)
        ]
    )
    np.testing.assert_allclose(lt.sigma_as_printed(seqs, V).numpy(), literal, rtol=1e-12)
    Sigma = lt.statistics(seqs, V).Sigma
    e = lt.eq10_check(seqs, V, Sigma, k=2)
    gap = np.linalg.norm(literal - Sigma.numpy()) / np.linalg.norm(Sigma.numpy())
    assert e["gap"] == pytest.approx(gap) and e["gap"] > 0.05 and e["uncentred_gap"] < e["gap"]
    same = lt.eq10_check(seqs, V, lt.sigma_as_printed(seqs, V), k=2)
    assert same["gap"] == 0.0 and same["cos"] == pytest.approx(1.0) and same["top"] == 1.0
