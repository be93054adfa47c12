"""One gradient step from zero initialisation (main paper, Section 3.1, Theorem 1, Appendix D).

The simplified model of Eq. (2), with orthonormal embeddings realised as
standard basis vectors (Assumption D.1): for V = N + 1 tokens, d = 2V,
W_E(i) = e_i, W~_E(i) = e_{V+i} (the previous-token embedding) and
W_U(j) = e_j. So x_t = W_E(z_t) + W~_E(z_{t-1}) (x_1 = W_E(z_1)) and

    xi = W_U ( sum_t softmax(x_T^T W_QK x_{1:T})_t W_V x_t  +  W_F x_T ).

Data: :class:`companion.data.recall.RecallTask` with uniform pi_u, pi_b over
[N] and trigger q = 0 (the paper's q; any fixed trigger is equivalent).

Two code paths compute the first gradient at W_QK = W_V = W_F = 0:

* :class:`SimplifiedModel` and ``autograd`` (the model itself);
* :func:`first_gradients`, which uses that at zero all probabilities are
  1/(N+1) and attention is uniform, so the gradients are sums of
  (1/(N+1) - 1{y = j}) times token counts (Lemma H.1's form); it is
  checked against autograd and used for the large-m sweeps.
"""

from __future__ import annotations

import numpy as np
import torch

from companion import train
from companion.config import check_choice, check_float, check_int
from companion.data.recall import RecallTask
from companion.data.shakespeare import CharStats
from companion.report import mean_se


def simplified_task(N: int, T: int, alpha: float) -> RecallTask:
    """Section 3.1's data: uniform unigram and bigram over [N], trigger q = 0, noise tau = N."""
    check_int("N", N, low=2)
    return RecallTask(seq_len=T, alpha=alpha, triggers=(0,), stats=CharStats.uniform(N))


class SimplifiedModel(torch.nn.Module):
    """Eq. (2) with one-hot orthonormal embeddings; weights start at zero."""

    def __init__(self, N: int):
        super().__init__()
        self.V = N + 1
        d = 2 * self.V
        self.W_QK = torch.nn.Parameter(torch.zeros(d, d, dtype=torch.float64))
        self.W_V = torch.nn.Parameter(torch.zeros(d, d, dtype=torch.float64))
        self.W_F = torch.nn.Parameter(torch.zeros(d, d, dtype=torch.float64))

    def embed(self, z: torch.Tensor) -> torch.Tensor:
        """(batch, T) ids -> (batch, T, 2V): W_E(z_t) + W~_E(z_{t-1})."""
        V = self.V
        x = torch.nn.functional.one_hot(z, 2 * V).double()
        x[:, 1:] += torch.nn.functional.one_hot(z[:, :-1] + V, 2 * V).double()
        return x

    def forward(self, z: torch.Tensor, parts: bool = False):
        x = self.embed(z)  # (batch, T, d)
        xT = x[:, -1]  # (batch, d)
        scores = torch.bmm(x, (xT @ self.W_QK).unsqueeze(-1)).squeeze(-1)  # x_T^T W_QK x_t: (batch, T)
        attn = torch.softmax(scores, dim=-1)
        phi = torch.bmm(attn.unsqueeze(1), x).squeeze(1) @ self.W_V.T  # W_V sum_t a_t x_t: (batch, d)
        xi_attn = phi[:, : self.V]  # W_U = [I_V, 0]
        xi_ff = (xT @ self.W_F.T)[:, : self.V]
        return (xi_attn, xi_ff) if parts else xi_attn + xi_ff


def autograd_first_gradients(task: RecallTask, batch) -> dict[str, np.ndarray]:
    """Gradients of the mean cross-entropy at zero, by autograd on :class:`SimplifiedModel`."""
    model = SimplifiedModel(task.n)
    z = torch.as_tensor(batch.inputs)
    y = torch.as_tensor(batch.targets[:, -1])
    loss = torch.nn.functional.cross_entropy(model(z), y)
    loss.backward()
    return {k: getattr(model, k).grad.numpy().copy() for k in ("W_QK", "W_V", "W_F")}


INPUTS = ("eq2", "positional")


def _features(task: RecallTask, batch, inputs: str = "eq2") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """g (m, V) = 1/V - onehot(y); xbar (m, D) mean input; xT (m, D) last input.

    ``inputs="eq2"``: x_t = W_E(z_t) + W~_E(z_{t-1}) (Eq. (2)), D = 2V.
    ``inputs="positional"``: x_t = W_E(z_t) + p_t with orthonormal p_t, D = V + T,
    the input the proofs of Lemmas D.1 and D.2 use.
    """
    check_choice("inputs", inputs, INPUTS)
    V, T = task.vocab_size, task.seq_len
    z = batch.inputs
    m = len(z)
    rows = np.arange(m)
    g = np.full((m, V), 1.0 / V)
    g[rows, batch.targets[:, -1]] -= 1.0
    D = 2 * V if inputs == "eq2" else V + T
    xbar = np.zeros((m, D))
    np.add.at(xbar, (np.repeat(rows, T), z.ravel()), 1.0)
    xT = np.zeros((m, D))
    xT[rows, z[:, -1]] = 1.0
    if inputs == "eq2":
        np.add.at(xbar, (np.repeat(rows, T - 1), (z[:, :-1] + V).ravel()), 1.0)
        xT[rows, z[:, -2] + V] = 1.0
    else:
        xbar[:, V:] = 1.0
        xT[rows, V + T - 1] = 1.0
    xbar /= T
    return g, xbar, xT


def first_gradients(task: RecallTask, batch) -> dict[str, np.ndarray]:
    """The same gradients from token counts (rows: output tokens j; columns: input coordinates)."""
    g, xbar, xT = _features(task, batch)
    m, V = g.shape
    out = {"W_V": np.zeros((2 * V, 2 * V)), "W_F": np.zeros((2 * V, 2 * V)), "W_QK": np.zeros((2 * V, 2 * V))}
    out["W_V"][:V] = g.T @ xbar / m
    out["W_F"][:V] = g.T @ xT / m
    return out


def margin(xi: np.ndarray, noise: int) -> np.ndarray:
    """Delta(xi) = xi_tau - max_{j != tau} xi_j, per row."""
    others = np.delete(xi, noise, axis=-1)
    return xi[..., noise] - others.max(-1)


def one_step_margins(
    N: int,
    T: int,
    alpha: float,
    ms,
    repeats: int,
    n_test: int = 64,
    eta_f: float = 1.0,
    eta_v: float = 1.0,
    seed: int = 0,
    chunk: int = 2000,
    inputs: str = "eq2",
    m_ref: int = 200_000,
) -> dict:
    """Margins after one GD step on the first m samples, for each m in ``ms`` and each repeat.

    Returns ``ff`` and ``attn`` margins (repeats, len(ms), n_test); ``ff_ref``
    and ``attn_ref`` (n_test,), the margins after a step on ``m_ref`` fresh
    samples (the population value up to its own small error); the theorem's
    targets eta_f alpha and eta_v alpha_hat / N per test sequence; and the
    test noise fractions q_hat.
    """
    check_float("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
    check_int("repeats", repeats, low=1)
    check_int("m_ref", m_ref, low=1)
    check_choice("inputs", inputs, INPUTS)
    ms = sorted(int(m) for m in ms)
    for m in ms:
        check_int("m", m, low=1)
    task = simplified_task(N, T, alpha)
    rng = np.random.default_rng([seed, N, T])
    test = task.sample(rng, n_test)
    _, xbar_test, xT_test = _features(task, test, inputs)

    def margins(GV, GF, m):
        return (
            margin(-eta_f * (xT_test @ (GF / m).T), task.noise_token),
            margin(-eta_v * (xbar_test @ (GV / m).T), task.noise_token),
        )

    def accumulate(GV, GF, n):
        done = 0
        while done < n:
            g, xbar, xT = _features(task, task.sample(rng, min(chunk, n - done)), inputs)
            GV += g.T @ xbar
            GF += g.T @ xT
            done += len(g)

    D = xbar_test.shape[1]
    ff = np.zeros((repeats, len(ms), n_test))
    at = np.zeros((repeats, len(ms), n_test))
    for r in range(repeats):
        GV, GF = np.zeros((task.vocab_size, D)), np.zeros((task.vocab_size, D))
        seen = 0
        for k, m in enumerate(ms):
            accumulate(GV, GF, m - seen)
            seen = m
            ff[r, k], at[r, k] = margins(GV, GF, m)
    GV, GF = np.zeros((task.vocab_size, D)), np.zeros((task.vocab_size, D))
    accumulate(GV, GF, m_ref)
    ff_ref, at_ref = margins(GV, GF, m_ref)
    q_hat = (test.inputs == task.noise_token).mean(1)
    alpha_hat = alpha**2 * q_hat + alpha * (1 - q_hat)
    return {
        "m": np.array(ms),
        "ff": ff,
        "attn": at,
        "ff_ref": ff_ref,
        "attn_ref": at_ref,
        "target_ff": np.full(n_test, eta_f * alpha),
        "target_attn": eta_v * alpha_hat / N,
        "q_hat": q_hat,
        "N": N,
        "T": T,
        "alpha": alpha,
        "inputs": inputs,
    }


# --- Lemma D.1 and Table 3 (Lemma D.2): projected gradients, class-averaged ---

TABLE3_CASES = [  # (label, j-class, k-class): classes "tau", "q", "o" (other), "j" (k = j), "o2" (k != j)
    ("N+1, N+1", "tau", "tau"),
    ("N+1, q", "tau", "q"),
    ("N+1, [N]\\{q}", "tau", "o"),
    ("q, N+1", "q", "tau"),
    ("q, q", "q", "q"),
    ("q, [N]\\{q}", "q", "o"),
    ("[N]\\{q}, N+1", "o", "tau"),
    ("[N]\\{q}, q", "o", "q"),
    ("[N]\\{q}, j", "o", "j"),
    ("[N]\\{q}, [N]\\{q,j}", "o", "o2"),
]


def table3_paper(alpha: float, N: int) -> dict[str, float]:
    """Table 3's mu(j, k) as printed (leading order in 1/N)."""
    a = alpha
    return {
        "N+1, N+1": -(a**2) / N,
        "N+1, q": -a / N,
        "N+1, [N]\\{q}": -a / N,
        "q, N+1": (2 * a - 1) / N**2,
        "q, q": (2 * a - 1) / (a * N**2),
        "q, [N]\\{q}": a / N**2,
        "[N]\\{q}, N+1": a**2 / N**2,
        "[N]\\{q}, q": a / N**2,
        "[N]\\{q}, j": -(a**2 + 3 * a - 1) / N**2,
        "[N]\\{q}, [N]\\{q,j}": a / N**2,
    }


def table3_scale(alpha: float, N: int) -> dict[str, float]:
    """Size of the two contributions each row of Table 3 is the difference of.

    Every mu(j, k) in Appendix E is E[(1/(N+1)) f_k] - E[1{y = j} f_k] (f_k the
    frequency of k), each to leading order; the next-order terms are O(1/N)
    relative to these contributions, not to their difference, which cancels
    in some rows (e.g. (q, N+1) = (2 alpha - 1)/N^2).
    """
    a = alpha
    return {
        "N+1, N+1": a / N**2 + a**2 / N,
        "N+1, q": 1 / N**2 + a / N,
        "N+1, [N]\\{q}": 1 / N**2 + a / N,
        "q, N+1": a / N**2 + (1 - a) / N**2,
        "q, q": 1 / N**2 + (1 - a) / (a * N**2),
        "q, [N]\\{q}": (2 - a) / N**2,
        "[N]\\{q}, N+1": a * (2 - a) / N**2,
        "[N]\\{q}, q": (2 - a) / N**2,
        "[N]\\{q}, j": (1 + (1 - a) * (2 - a)) / N**2,
        "[N]\\{q}, [N]\\{q,j}": (2 - a) / N**2,
        "F: N+1": 1 / N + a,
        "F: k<=N": 1 / N + (1 - a) / N,
    }


def table3_rederived(alpha: float, N: int) -> dict[str, float]:
    """Table 3 with the one entry that disagrees with its own proof replaced (Case 9 of App. E)."""
    out = table3_paper(alpha, N)
    out["[N]\\{q}, j"] = (-(alpha**2) + 3 * alpha - 1) / N**2
    return out


def gradient_projections(
    task: RecallTask, m: int, rng: np.random.Generator, chunk: int = 5000, include_last: bool = True
) -> dict:
    """Monte Carlo of Gamma(j, k) = W_U(j)^T grad_{W_V} W_E(k) (Lemma D.2) and of
    W_U(k)^T grad_{W_F} W_E(q) (Lemma D.1), averaged over the members of each case.

    ``include_last=False`` leaves the forced final token z_T = q out of the
    token counts, as Appendix E does ("we do not consider z_T = q"); the
    gradient itself includes it, which adds 1/T to the frequency of q.

    Returns, per case label, the mean over the m samples and its standard
    error (the per-sample class averages are i.i.d.); the label
    ``"N+1, q (all z_t)"`` repeats the (N+1, q) case with z_T counted.
    """
    check_int("m", m, low=2)
    V, N, q, tau = task.vocab_size, task.n, task.triggers[0], task.noise_token
    others = np.array([k for k in range(N) if k != q])
    samples: dict[str, list] = {}
    seen = 0
    while seen < m:
        b = task.sample(rng, min(chunk, m - seen))
        g, xbar, xT = _features(task, b)
        c = xbar[:, :V].copy()  # (m, V) token frequencies, i.e. W_E(k) projections
        if not include_last:
            c[:, q] -= 1.0 / task.seq_len
        go = g[:, others]  # (m, N-1)
        co = c[:, others]
        cls_g = {"tau": g[:, tau], "q": g[:, q]}
        cls_c = {"tau": c[:, tau], "q": c[:, q], "o": co.mean(1)}
        for label, jc, kc in TABLE3_CASES:
            if jc != "o":
                val = cls_g[jc] * cls_c[kc]
            elif kc in ("tau", "q"):
                val = go.mean(1) * cls_c[kc]
            elif kc == "j":
                val = (go * co).mean(1)
            else:  # mean over ordered pairs j != k of others
                n_o = len(others)
                val = (go.sum(1) * co.sum(1) - (go * co).sum(1)) / (n_o * (n_o - 1))
            samples.setdefault(label, []).append(val)
        samples.setdefault("N+1, q (all z_t)", []).append(g[:, tau] * xbar[:, q])
        samples.setdefault("F: N+1", []).append(g[:, tau] * xT[:, q])
        samples.setdefault("F: k<=N", []).append(g[:, :N].mean(1) * xT[:, q])
        seen += len(g)
    out = {}
    for label, parts in samples.items():
        v = np.concatenate(parts)
        out[label] = mean_se(v)
    return out


def lemma_d1_paper(alpha: float, N: int) -> dict[str, float]:
    """Lemma D.1's mu(k) (its Eq. (7); the lemma's table keeps only the leading -alpha for k = N + 1)."""
    return {"F: N+1": 1 / (N + 1) - alpha, "F: k<=N": 1 / (N + 1) - (1 - alpha) / N}


# --- Section 3.2 / Theorem 2 / Appendix F: the attention gradient once W_F holds the noise ---


def noise_ff(N: int, p_noise: float) -> np.ndarray:
    """W_F (2V x 2V) = c W_U(N+1) W_E(q)^T with c chosen so that the noise gets probability
    ``p_noise`` when all other logits are 0 (q = 0): Assumption F.1.2 / B.3's setting."""
    check_float("p_noise", p_noise, 0.0, 1.0, low_open=True, high_open=True)
    V = N + 1
    W = np.zeros((2 * V, 2 * V))
    W[N, 0] = np.log(N * p_noise / (1 - p_noise))
    return W


def _logits(task, batch, W_V, W_F, inputs="eq2"):
    _, xbar, xT = _features(task, batch, inputs)
    V = task.vocab_size
    return (xbar @ W_V.T + xT @ W_F.T)[:, :V], xbar, xT


def expected_target(task: RecallTask, batch) -> np.ndarray:
    """E[e_y | context] = (1 - alpha) e_ybar + alpha e_tau (y is drawn independently of the context)."""
    m = len(batch.inputs)
    out = np.zeros((m, task.vocab_size))
    out[np.arange(m), batch.final_ybar] += 1 - task.alpha
    out[:, task.noise_token] += task.alpha
    return out


def population_value_gradient(
    task: RecallTask, W_F: np.ndarray, m: int, rng, chunk: int = 5000
) -> np.ndarray:
    """-grad_{W_V} L at W_QK = W_V = 0 (2V x 2V), Monte Carlo over m contexts, exact over y."""
    V = task.vocab_size
    G = np.zeros((2 * V, 2 * V))
    done = 0
    while done < m:
        b = task.sample(rng, min(chunk, m - done))
        xi, xbar, _ = _logits(task, b, np.zeros_like(W_F), W_F)
        p = np.exp(xi - xi.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        G[:V] -= (p - expected_target(task, b)).T @ xbar
        done += len(p)
    return G / m


def qk_gradient(task: RecallTask, W_V: np.ndarray, W_F: np.ndarray, m: int, rng, **options):
    """Q = W_E(q)^T (-grad_{W_QK} L) [key coordinates] at W_QK = 0: a (2V,) vector whose first
    V entries are the W_E(j) keys and last V the W~_E(i) keys, with its standard errors (the mean and
    standard error of :func:`qk_gradient_samples`, which takes ``options``: ``chunk``, ``rao_blackwell``)."""
    return mean_se(qk_gradient_samples(task, W_V, W_F, m, rng, **options))


def qk_gradient_samples(
    task: RecallTask,
    W_V: np.ndarray,
    W_F: np.ndarray,
    m: int,
    rng,
    chunk: int = 2000,
    rao_blackwell: bool = True,
) -> np.ndarray:
    """:func:`qk_gradient`'s projection per sampled sequence: (m, 2V), one row per sequence, so that the
    standard error of any linear combination of its columns (a difference of two keys) is exact.

    At W_QK = 0 attention is uniform and, per sample,
    grad = (1/T) sum_t (g . W_U W_V x_t) x_T (x_t - xbar)^T with g = softmax(xi) - e_y
    (checked against autograd in the tests). With ``rao_blackwell`` e_y is
    replaced by its conditional mean given the context (same expectation,
    lower variance).
    """
    V, T, q = task.vocab_size, task.seq_len, task.triggers[0]
    M = W_V[:V]  # (V, 2V): W_U W_V in one-hot coordinates
    parts = []
    done = 0
    while done < m:
        b = task.sample(rng, min(chunk, m - done))
        z = b.inputs
        n = len(z)
        xi, xbar, xT = _logits(task, b, W_V, W_F)
        p = np.exp(xi - xi.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        if rao_blackwell:
            g = p - expected_target(task, b)
        else:
            g = p.copy()
            g[np.arange(n), b.targets[:, -1]] -= 1
        h = g @ M  # (n, 2V)
        rows = np.arange(n)[:, None]
        gv = h[rows, z]  # (n, T): g . W_U W_V W_E(z_t)
        gv[:, 1:] += h[rows, z[:, :-1] + V]  # + g . W_U W_V W~_E(z_{t-1})
        S = np.zeros((n, 2 * V))
        np.add.at(S, (np.repeat(np.arange(n), T), z.ravel()), gv.ravel())
        np.add.at(S, (np.repeat(np.arange(n), T - 1), (z[:, :-1] + V).ravel()), gv[:, 1:].ravel())
        S /= T
        proj = -(S - gv.mean(1, keepdims=True) * xbar) * xT[:, [q]]  # query side: W_E(q)^T x_T = 1
        parts.append(proj)
        done += n
    return np.concatenate(parts)


def train_simplified(
    N: int,
    T: int,
    alpha: float,
    steps: int,
    batch: int = 256,
    lr: float = 1.0,
    seed: int = 0,
    record_every: int = 1,
) -> dict:
    """Full-model SGD (autograd) on Eq. (2) from zero, fresh batches each step.

    Records, every ``record_every`` steps, the quantities the three phases of
    Appendix F are about (q = 0, tau = N):

    * ``ff_noise``: W_U(tau)^T W_F W_E(q), the feed-forward noise association;
    * ``v_noise``: mean_k W_U(tau)^T W_V W_E(k); ``v_diag``: mean_{k != q} W_U(k)^T W_V W_E(k)
      and ``v_prev``: mean_{k != q} W_U(k)^T W_V W~_E(k), the identity structure of W_V;
    * ``qk_noise``: mean_{j != q} xi_{q->j} - xi_{q->tau} and ``qk_trigger``:
      mean_{i != q} (xi_{q->j} at previous token q vs i), the attention logits of Theorem 2;
    * ``p_noise``: the mean predicted probability of tau on the batch.
    """
    check_int("steps", steps, low=1)
    check_int("batch", batch, low=1)
    check_float("lr", lr, 0.0, 1e3, low_open=True)
    task = simplified_task(N, T, alpha)
    V = task.vocab_size
    rng = np.random.default_rng([seed, N, T, 7])
    model = SimplifiedModel(N)
    others = torch.arange(1, N)
    rec: dict[str, list] = {
        k: []
        for k in ("step", "ff_noise", "v_noise", "v_diag", "v_prev", "qk_noise", "qk_trigger", "p_noise")
    }
    drawn: dict = {}  # the batch of the current step and the model's logits on it (one forward per step)

    def draw(step: int):
        if step not in drawn:
            drawn.clear()
            b = task.sample(rng, batch)
            drawn[step] = b, model(torch.as_tensor(b.inputs))
        return drawn[step]

    def record(step: int) -> None:
        logits = draw(step)[1]
        with torch.no_grad():
            WF, WV, WQK = model.W_F, model.W_V, model.W_QK
            rec["step"].append(step)
            rec["ff_noise"].append(WF[N, 0].item())
            rec["v_noise"].append(WV[N, :V].mean().item())
            rec["v_diag"].append(WV[others, others].mean().item())
            rec["v_prev"].append(WV[others, V + others].mean().item())
            rec["qk_noise"].append((WQK[0, others].mean() - WQK[0, N]).item())
            rec["qk_trigger"].append((WQK[0, V + 0] - WQK[0, V + others].mean()).item())
            rec["p_noise"].append(torch.softmax(logits, -1)[:, N].mean().item())

    def loss_at(step: int) -> torch.Tensor:
        b, logits = draw(step)
        return torch.nn.functional.cross_entropy(logits, torch.as_tensor(b.targets[:, -1]))

    train.fit(
        None,
        torch.optim.SGD(model.parameters(), lr=lr),
        steps,
        loss_at,
        evaluate=record,
        eval_at=lambda step: step % record_every == 0,
        nonfinite="continue",
        progress=False,
    )
    return {k: np.array(v) for k, v in rec.items()}
