"""The claim registry: every checked claim of the book, paper value next to ours.

A chapter's Check cell calls :func:`check` with the measured value and the
tolerance for the active profile. The result (pass or fail) is recorded
atomically under ``<cache>/claims/<profile>/<id>.json`` together with the
package hash, and the call raises ``AssertionError`` on failure, so CI fails
when a claim stops holding. ``book/scorecard.md`` renders :func:`scorecard`.

>>> r = check("demo.example", 0.49, expected=0.5, tol=0.05, record=False, quiet=True)
>>> r["passed"]
True
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from companion import config
from companion.io import atomic_write_text


@dataclass(frozen=True)
class Claim:
    """A claim of a paper, as the book checks it."""

    id: str
    chapter: str  # docname of the chapter that checks it, e.g. "book/noisy_recall"
    source: str  # where the paper says it
    statement: str
    paper: str  # the paper's value, as the paper gives it
    scale: str = "any"  # "any": asserted in every profile; "full" / "quick": only in that profile;
    # "real": a claim about a pretrained model, asserted when its real weights are used, else skipped


_CLAIMS = [
    Claim("demo.example", "", "", "doctest example (not shown)", "0.5"),
    Claim("recall.full_noise", "book/noisy_recall", "main paper, Sec. 3 and Fig. 3",
          "trained on alpha = 0.5, the full model predicts the noise token on clean data with "
          "probability close to alpha", "≈ 0.5"),
    Claim("recall.drop_f2_correct", "book/noisy_recall", "main paper, Sec. 3 and Fig. 3",
          "dropping F2 (rho = 0 on U_in of F2) makes the model predict the correct token "
          "with high probability", "≈ 0.98"),
    Claim("recall.drop_f2_gain", "book/noisy_recall", "main paper, Fig. 3",
          "dropping F2 raises the probability of the correct token over the full model "
          "(difference)", "≈ 0.98 - 0.5"),
    Claim("recall.noise_first", "book/noisy_recall", "main paper, Sec. 3, Figs. 3 and 8",
          "the noise association is learned in the first few steps (noise probability on "
          "noisy data near 1), before the in-context mechanism", "~5 steps"),
    Claim("recall.noise_before_icl", "book/noisy_recall", "main paper, Sec. 3",
          "step at which the noise is first predicted with probability > 0.5 comes before "
          "the step at which the correct token first is (clean data, F2 dropped)", "noise first"),
    Claim("recall.f2_margin", "book/noisy_recall", "main paper, Fig. 3 (right)",
          "the F2 margin of tau over all other tokens for input q becomes positive early",
          "> 0 within early steps"),
    Claim("recall.attn_avoids_noise", "book/noisy_recall", "main paper, Fig. 4 (left)",
          "the second-layer attention from the last position puts more mass on [q, ybar] "
          "positions than on [q, tau] positions (ratio)", "attends [q, ybar], not [q, tau]"),
    Claim("recall.prev_token_head", "book/noisy_recall", "main paper, Fig. 7 (left)",
          "the first-layer attention attends to the previous token (mean mass on s = t - 1)",
          "previous-token pattern"),
    Claim("recall.value_recall", "book/noisy_recall", "main paper, Fig. 7 (right)",
          "W_V^2 maps W_E(i) to W_U(i): fraction of ordinary tokens i whose top logit "
          "<W_V^2 W_E(i), W_U(j)> is at j = i", "diagonal"),
    Claim("finetune.noise_fraction", "book/finetune", "main paper, Fig. 8 (right)",
          "after pre-training on alpha = 0 and fine-tuning on alpha = 0.5, the model predicts "
          "noise with probability near 0.5 on noisy data", "≈ 0.5"),
    Claim("finetune.noise_spike", "book/finetune", "main paper, Fig. 8 (right)",
          "in the first few fine-tuning steps the noise probability rises close to 1",
          "close to 1 within ~5 steps"),
    Claim("finetune.pretrain_attends_all", "book/finetune", "main paper, App. B.1",
          "after pre-training (alpha = 0) the second-layer attention attends to all tokens "
          "after the trigger: per-position mass on [q, tau] comparable to [q, ybar] "
          "(ratio)", "attends all tokens after q"),
    Claim("finetune.attn_avoids_noise", "book/finetune", "main paper, Fig. 4 (right)",
          "after fine-tuning, the second-layer attention favours [q, ybar] over [q, tau] "
          "(ratio of mass)", "attends [q, ybar], not [q, tau]"),
    Claim("finetune.drop_f2_correct", "book/finetune", "main paper, Fig. 3 / App. B.1",
          "after fine-tuning, dropping F2 makes the model predict the correct token with "
          "high probability", "high (≈ 0.98 in the noisy schedule)"),
    Claim("assoc.b_limit", "book/theory_assoc_memory", "main paper, Lemma H.3",
          "b(t) -> log(alpha / (1 - alpha)) (max |b(t_max) - limit| over alpha in {0.25, 0.3, 0.35}, "
          "both flows)", "log(alpha / (1 - alpha))"),
    Claim("assoc.a_limit", "book/theory_assoc_memory", "main paper, Lemma H.3 (corrected here)",
          "a(t) + log t -> log(5 / (18 (1 - alpha))) for the paper's ODE (43); max deviation at t = 1e8",
          "-log((1 - alpha)(4 - 2 alpha)) (off by 0.03-0.09; see chapter)"),
    Claim("assoc.lemma_constant_off", "book/theory_assoc_memory", "main paper, Lemma H.3",
          "the stated constant -log((1 - alpha)(4 - 2 alpha)) misses the numerical limit of "
          "a(t) + log t (min deviation over alpha, t = 1e8)", "exact limit"),
    Claim("assoc.a_limit_W_flow", "book/theory_assoc_memory", "derived here",
          "under gradient flow on W itself, a(t) + log t -> log(4 / (3 (1 - alpha))) "
          "(max deviation at t = 1e8)", "(not stated)"),
    Claim("assoc.full_noise", "book/theory_assoc_memory", "main paper, Theorem 3",
          "the full model predicts the noise with probability alpha (max |P - alpha| at t = 1e8)", "alpha"),
    Claim("assoc.rank1_slope", "book/theory_assoc_memory", "main paper, Theorem 3",
          "the rank-1 model's noise probability decays like t^(-1/2): log-log slope over [1e4, 1e8]",
          "-1/2"),
    Claim("assoc.gd_follows_W_flow", "book/theory_assoc_memory", "main paper, Theorem 3 (gradient flow)",
          "gradient descent on W (autograd, lr 0.1) follows the W-flow ODE: max |beta_GD - beta_ODE|",
          "gradient flow"),
    Claim("assoc.fig18_rank2", "book/theory_assoc_memory", "main paper, Fig. 18",
          "rank-2 truncation has a much lower pure-label loss than the full model: fraction of the 20 "
          "runs (d = 12) where it is lower at the end", "usually"),
    Claim("assoc.fig18_stability", "book/theory_assoc_memory", "main paper, Fig. 18",
          "larger d is more stable: time-averaged interquartile range of the rank-2 loss, d = 12 over d = 8",
          "< 1"),
    Claim("b3.fixed_point", "book/theory_noise_logit", "main paper, App. B.3",
          "the noise-logit recursion converges to log N + log(alpha / (1 - alpha)) "
          "(max |xi_T - xi*| over a grid of N and alpha)", "log N + log(alpha/(1-alpha))"),
    Claim("b3.bound_limit", "book/theory_noise_logit", "main paper, App. B.3",
          "g(x) -> 1/(alpha(1 - alpha)) as x -> 0-: max relative deviation at x = -1e-6", "1/(alpha(1-alpha))"),
    Claim("b3.no_overshoot", "book/theory_noise_logit", "main paper, App. B.3",
          "with eta = 0.99 / (alpha(1 - alpha)) the iterate never exceeds the fixed point: max xi_hat",
          "xi_hat <= 0"),
    Claim("b3.overshoot_above", "book/theory_noise_logit", "main paper, App. B.3",
          "with eta = 1.2 / (alpha(1 - alpha)) it does: min over the grid of max xi_hat", "(bound is tight)"),
    Claim("t1.ff_margin", "book/theory_one_step", "main paper, Theorem 1",
          "after one step the feed-forward margin of the noise tends to eta_f alpha: the relative "
          "bias of its population value, times N (max over N)", "eta_f alpha, O(1/N) bias"),
    Claim("t1.ff_rate", "book/theory_one_step", "main paper, Theorem 1",
          "deviation of the feed-forward margin from its population value shrinks like m^(-1/2): "
          "fitted log-log slope farthest from -1/2 over N", "-1/2"),
    Claim("t1.attn_margin", "book/theory_one_step", "main paper, Theorem 1 (factor corrected)",
          "population attention margin over eta_v alpha_hat / N at the largest N, with Eq. (2)'s inputs "
          "(the previous-token copy doubles it)", "1 (as stated); 2 with Eq. (2)'s inputs"),
    Claim("t1.attn_rate", "book/theory_one_step", "main paper, Theorem 1",
          "relative deviation of the attention margin shrinks like m^(-1/2) (m >= 100): slope "
          "farthest from -1/2 over N", "-1/2"),
    Claim("t1.attn_samples", "book/theory_one_step", "main paper, Theorem 1, observation ii",
          "growth exponent in N of the sample size at which the attention margin is resolved "
          "(mean relative deviation 0.25)", "m = Omega~(N) suffices (bound)"),
    Claim("d1.means", "book/theory_one_step", "main paper, Lemma D.1",
          "Monte Carlo means of W_U(k)^T grad_{W_F} W_E(q) vs mu(k): max |z-score| over k and N", "mu(k)"),
    Claim("d2.table3", "book/theory_one_step", "main paper, Lemma D.2, Table 3 (row 9 corrected)",
          "Monte Carlo means of W_U(j)^T grad_{W_V} W_E(k) vs Table 3's mu(j, k), all 10 cases: max "
          "|MC - mu| / (4 SE + (1/alpha + 2) scale/N) over cases and N (scale: see chapter)", "Table 3"),
    Claim("d2.table3_row9", "book/theory_one_step", "main paper, Table 3 row 9",
          "the printed mu = -(alpha^2 + 3 alpha - 1)/N^2 for j in [N]\\{q}, k = j misses the Monte Carlo "
          "mean at every N (same normalised error > 1; its own proof gives (-alpha^2 + 3 alpha - 1)/N^2)",
          "printed entry"),
    Claim("d2.last_token", "book/theory_one_step", "main paper, App. E (z_T = q left out)",
          "counting the forced z_T = q multiplies the (N+1, q) entry by 1 + N/T: measured factor over "
          "1 + N/T (N = 200, T = 256)", "no change for T >> 1"),
    Claim("t2.qk_noise_sign", "book/theory_attention", "main paper, App. B.3 Eq. (24)",
          "with W_F holding the noise (p < alpha) and W_V after one step, one W_QK step lowers the "
          "logit of noise keys: max over N of W_E(q)^T(-grad W_QK)W_E(N+1)", "-Theta(1/N^2) < 0"),
    Claim("t2.qk_noise_slope", "book/theory_attention", "main paper, App. B.3 Eq. (24)",
          "log-log slope in N of |W_E(q)^T(-grad W_QK)W_E(N+1)| (T = 64)", "-2"),
    Claim("t2.qk_others_large_T", "book/theory_attention", "main paper, App. B.3 Eq. (24)",
          "for ordinary keys k <= N (k != q) the projection is positive when T >> N "
          "(mean over k, N = 20, T = 1024)", "+Theta(1/N^3) > 0"),
    Claim("t2.qk_others_small_T", "book/theory_attention", "main paper, App. B.3 (T >> N needed)",
          "at T = 64 the same projection is negative (mean over k, N = 20): the sign needs T >> N", "(not stated)"),
    Claim("t2.phases_ff_first", "book/theory_attention", "main paper, App. F (three phases)",
          "training Eq. (2) from zero, the feed-forward noise association reaches half its final "
          "value within a few steps (max over N of the half-time, steps)", "O(1/eta) steps"),
    Claim("t2.phases_order", "book/theory_attention", "main paper, App. F (three phases)",
          "the in-context structure (W_V identity part, W_QK matching) comes much later: min over N "
          "of the W_QK half-time over the W_F half-time", "W_F, then W_V, then W_QK"),
    Claim("t2.ff_rate", "book/theory_attention", "main paper, App. B.3 / F (update sizes)",
          "first-step update of the W_F noise association is Theta(1): log-log slope over N", "0"),
    Claim("t2.v_rate", "book/theory_attention", "main paper, App. B.3 / F (update sizes)",
          "first-step update of the W_V noise row scales like 1/N: log-log slope over N", "-1"),
    Claim("t2.attention_orderings", "book/theory_attention", "main paper, Theorem 2",
          "after training, W_QK favours keys after the trigger and, among them, correct tokens over "
          "the noise: min over N of min(xi_{q->j} - xi_{q->N+1}, trigger-key margin)", "> 0"),
    Claim("triggers.one", "book/triggers", "main paper, App. B.4, Fig. 9 (left)",
          "one trigger: the matching logit <W_V^1 W_E(i), W_QK^2 W_E(j)> is large only at i = j = q: "
          "its value over the largest other entry", "large only at i = j = q"),
    Claim("triggers.five", "book/triggers", "main paper, App. B.4, Fig. 9 (right)",
          "five triggers Q = {1, 39, 43, 53, 58}: large only at i = j in Q: smallest (q, q) entry over "
          "the largest entry off those five", "large only at i = j in Q"),
    Claim("triggers.argmax", "book/triggers", "main paper, App. B.4",
          "for every trigger q (both runs), (q, q) is the largest entry of its row and of its column: "
          "fraction of triggers", "all"),
    Claim("arch.mm_drop_f2", "book/architectures", "main paper, App. B.5, Fig. 10",
          "F1, F2 both MLPs: with F2 dropped the model predicts the correct token (clean test accuracy)",
          "correct w.p. near 1"),
    Claim("arch.mm_drop_f1", "book/architectures", "main paper, App. B.5, Fig. 10",
          "F1, F2 both MLPs: with F1 dropped the model predicts the noise: fraction of argmax = tau, "
          "minus the full model's", "predicts noise w.h.p."),
    Claim("arch.ml_drop_f2", "book/architectures", "main paper, App. B.5, Fig. 11",
          "F1 MLP, F2 linear: dropping F2 helps: accuracy gain over the full model", "helps"),
    Claim("arch.ml_drop_f1", "book/architectures", "main paper, App. B.5, Fig. 11",
          "F1 MLP, F2 linear: dropping F1 helps and gives the lowest loss: min(loss full, loss drop F2) "
          "- loss drop F1", "drop F1 best (lower loss)", scale="full"),
    Claim("arch.ml_drop_f1_quick", "book/architectures", "this book (disagrees with Fig. 11 at the quick size)",
          "F1 MLP, F2 linear, quick size: dropping F1 raises the clean test loss over the full model "
          "(loss drop F1 - loss full)", "(paper: drop F1 helps)", scale="quick"),
    Claim("arch.lm_drop_f2", "book/architectures", "main paper, App. B.5, Fig. 12",
          "F1 linear, F2 MLP: dropping F2 helps: accuracy gain over the full model", "only dropping F2 helps"),
    Claim("arch.lm_drop_f1", "book/architectures", "main paper, App. B.5, Fig. 12",
          "F1 linear, F2 MLP: dropping F1 makes the model predict the noise more: fraction of argmax = tau, "
          "minus the full model's", "predicts noise more"),
    Claim("arch.nn_small_rho", "book/architectures", "main paper, App. B.5, Fig. 13",
          "no feed-forward layers: rho = 0.01 on the first-layer value matrix destroys the model "
          "(accuracy over the full model's)", "destroys performance"),
    Claim("arch.nn_best_rho", "book/architectures", "main paper, App. B.5, Fig. 13",
          "no feed-forward layers: the best rho in (0, 1) on W_V^1 lowers the clean test loss "
          "(full loss - best loss)", "best rho = 0.05 helps a little", scale="full"),
    Claim("arch.search_best", "book/architectures", "main paper, Sec. 3 / App. B.5",
          "searching every truncation of the MLP, MLP model, the best (lowest clean loss) removes F2 "
          "(drop F2 or rho <= 0.05 on a matrix of F2)", "fully drop F2"),
    Claim("alloc.monotone", "book/allocation", "main paper, App. A, Fig. 6",
          "for a fixed budget, fewer MLP parameters give a higher loss on the bigram task: Spearman "
          "correlation of MLP share and best-lr training loss, largest over budgets", "fewer MLP -> higher loss"),
    Claim("alloc.gap", "book/allocation", "main paper, App. A, Fig. 6",
          "loss at the smallest MLP share minus loss at the largest, smallest over budgets (nats)",
          "fewer MLP -> higher loss"),
    Claim("ioi.sgd_drop_last", "book/synthetic_ioi", "main paper, App. J, Fig. 19",
          "synthetic IOI, SGD: dropping the last layer's MLP improves clean test accuracy at every depth "
          "(smallest gain over L)", "improves for L = 3..7"),
    Claim("ioi.adam_rho", "book/synthetic_ioi", "main paper, App. J, Fig. 20",
          "synthetic IOI, Adam: rho = 0.01 on the last MLP's input matrix improves clean test accuracy "
          "for L = 3, 4 (smallest gain)", "improves for L = 3, 4"),
    Claim("ioi.adam_deep_fails", "book/synthetic_ioi", "main paper, App. J, Fig. 20",
          "synthetic IOI, Adam, L = 5 fails to converge: late clean loss above that of L = 3 (nats; "
          "inf if it diverged)", "fails to converge for L = 5", scale="full"),
    Claim("llm.gpt2_restored", "book/llm_gpt2_ioi", "pipeline (this book)",
          "after the LASER sweep every weight equals its original value (1 = yes)", "(pipeline)"),
    Claim("llm.gpt2_rank", "book/llm_gpt2_ioi", "pipeline (this book), Sec. 2.2",
          "the truncated MLP input matrix has rank floor(rho * min(shape)) at rho = 0.1 (difference)",
          "rank floor(rho min(d_in, d_out))"),
    Claim("llm.gpt2_probs", "book/llm_gpt2_ioi", "pipeline (this book)",
          "the next-token probabilities of the batched forward pass sum to 1", "(pipeline)"),
    Claim("llm.gpt2_top4", "book/llm_gpt2_ioi", "main paper, Sec. 4.1",
          "GPT-2 Small's top-4 next tokens on the IOI prompt are Mary, them, the, John (fraction found)",
          "[Mary, them, the, John]", scale="real"),
    Claim("llm.gpt2_laser_the", "book/llm_gpt2_ioi", "main paper, Fig. 17",
          "LASER on the MLP input matrix of layer 9, 10 or 11 with rho in [0.1, 0.8] lowers the probability "
          "of 'the' and of 'them' (smallest mean drop)", "decreases 'the' and 'them'", scale="real"),
    Claim("llm.pythia_restored", "book/llm_pythia", "pipeline (this book)",
          "after the LASER measurements on the final checkpoint every weight equals its original (1 = yes)",
          "(pipeline)"),
    Claim("llm.pythia_probs", "book/llm_pythia", "pipeline (this book)",
          "every measured probability lies in [0, 1] (fraction)", "(pipeline)"),
    Claim("llm.pythia_checkpoints", "book/llm_pythia", "pipeline (this book), Fig. 5",
          "every requested checkpoint was loaded by revision and measured (fraction)", "(pipeline)"),
    Claim("llm.pythia_ioi_boost", "book/llm_pythia", "main paper, Sec. 4.1, Fig. 5 (left)",
          "Pythia-1B at step 14000: LASER (layer 11 MLP input, rho = 0.008) multiplies the ratio P([IO]) / "
          "P('the') on IOI prompts (ratio of ratios)", "2.3x -> 12.3x", scale="real"),
    Claim("llm.pythia_factual_boost", "book/llm_pythia", "main paper, Sec. 4.1, Fig. 5 (right)",
          "Pythia-1B at step 14000: LASER (layer 16 MLP input, rho = 0.0125) multiplies P('Spain') / P('the') "
          "on 'Madrid is located in' (ratio of ratios)", "0.16x -> 11.3x", scale="real"),
    Claim("llm.pythia_table1", "book/llm_pythia", "main paper, Table 1",
          "final Pythia-1B: the top token on 'Madrid is located in' is 'the', and 'Spain' after LASER "
          "(count of the two)", "the 0.499 -> Spain 0.300", scale="real"),
    Claim("llm.pythia_the_early", "book/llm_pythia", "main paper, App. C.1, Fig. 14",
          "'the' is among the top 10 next tokens after prepositions (average rank, both input sets) from an "
          "early checkpoint: first such step", "around 10 steps", scale="real"),
    Claim("llm.gsm8k_extraction", "book/llm_gsm8k", "pipeline (this book), Table 2 harness",
          "the answer extractor recovers the reference answer from every reference solution of the "
          "GSM8K test set (fraction)", "(pipeline)"),
    Claim("llm.gsm8k_accuracy_range", "book/llm_gsm8k", "pipeline (this book)",
          "every accuracy of the run lies in [0, 1] (1 = yes)", "(pipeline)"),
    Claim("llm.gsm8k_laser_few_shot", "book/llm_gsm8k", "main paper, Table 2",
          "LASER raises the 1- and 2-shot accuracy (smallest gain, points)", "Phi-3: +10.1, +2.2",
          scale="real"),
]
CLAIMS = {c.id: c for c in _CLAIMS}


NOT_CHECKED = "not checked"


def scale_only(scale: str) -> str:
    """Scorecard status of a claim asserted in another profile than the active one."""
    return f"{scale} scale only"


def _record_path(claim_id: str, profile: str):
    return config.cache_dir() / "claims" / profile / f"{claim_id}.json"


def check(claim_id: str, observed: float, *, expected: float | None = None, tol: float | None = None,
          above: float | None = None, below: float | None = None, profile: str | None = None,
          note: str = "", record: bool = True, quiet: bool = False) -> dict:
    """Compare ``observed`` with the claim's criterion, record it, and assert.

    Give either ``expected`` and ``tol`` (|observed - expected| <= tol), or
    ``above`` and/or ``below`` (strict bounds). A claim registered with
    ``scale="full"`` (or ``"quick"``) is asserted only in that profile; in the
    other the observation is recorded and shown as "full scale only", never
    as a pass.

    Raises:
        KeyError: unknown claim id.
        ValueError: no criterion given.
        AssertionError: the claim does not hold (after recording the failure).
    """
    if claim_id not in CLAIMS:
        raise KeyError(f"unknown claim {claim_id!r}: register it in companion/claims.py")
    profile = config.get_profile(profile)
    observed = float(observed)
    if expected is not None:
        if tol is None:
            raise ValueError("give tol with expected")
        passed = abs(observed - expected) <= tol
        criterion = f"{expected:g} ± {tol:g}"
    elif above is not None or below is not None:
        passed = (above is None or observed > above) and (below is None or observed < below)
        parts = ([f"> {above:g}"] if above is not None else []) + ([f"< {below:g}"] if below is not None else [])
        criterion = " and ".join(parts)
    else:
        raise ValueError("give expected and tol, or above/below")
    passed = bool(passed and math.isfinite(observed))
    scale = CLAIMS[claim_id].scale
    asserted = scale in ("any", "real", profile)
    result = {"id": claim_id, "observed": observed, "criterion": criterion, "passed": passed,
              "asserted": asserted, "profile": profile, "note": note, "package": config.package_hash()}
    if record:
        atomic_write_text(_record_path(claim_id, profile), json.dumps(result, indent=1))
    if not asserted:  # a claim about another size, observed here: shown, not asserted
        if not quiet:
            print(f"[{scale_only(scale).upper()}] {claim_id}: criterion {criterion}, observed {observed:.4g} "
                  f"in the {profile} profile ({'holds' if passed else 'does not hold'} here; asserted only "
                  f"in the {scale} profile; paper: {CLAIMS[claim_id].paper})")
        return result
    if not quiet:
        mark = "PASS" if passed else "FAIL"
        print(f"[{mark}] {claim_id}: expected {criterion}, observed {observed:.4g}"
              f" (paper: {CLAIMS[claim_id].paper})")
    if not passed:
        raise AssertionError(f"claim {claim_id} does not hold: observed {observed:.4g}, "
                             f"expected {criterion} ({CLAIMS[claim_id].statement})")
    return result


def skip(claim_id: str, reason: str, profile: str | None = None, quiet: bool = False) -> dict:
    """Record that a claim about a pretrained model was not checked (e.g. weights unreachable), and why."""
    if CLAIMS[claim_id].scale != "real":
        raise ValueError(f"only claims about pretrained models (scale='real') can be skipped; {claim_id!r} "
                         f"is scale={CLAIMS[claim_id].scale!r}")
    profile = config.get_profile(profile)
    result = {"id": claim_id, "skipped": reason, "profile": profile, "package": config.package_hash()}
    atomic_write_text(_record_path(claim_id, profile), json.dumps(result, indent=1))
    if not quiet:
        print(f"[NOT CHECKED] {claim_id}: {reason} (paper: {CLAIMS[claim_id].paper})")
    return result


def results(profile: str | None = None) -> list[dict]:
    """One row per registered claim (except doctest examples), with its recorded result if any."""
    profile = config.get_profile(profile)
    current = config.package_hash()
    rows = []
    for c in _CLAIMS:
        if not c.chapter:
            continue
        path = _record_path(c.id, profile)
        rec = json.loads(path.read_text()) if path.is_file() else None
        other_scale = c.scale not in ("any", "real", profile)
        if rec is not None and "skipped" in rec:
            status = f"{NOT_CHECKED}: {rec['skipped']}"
        elif rec is None:
            status = scale_only(c.scale) if other_scale else "not run"
        elif other_scale:
            status = f"{scale_only(c.scale)} ({'holds' if rec['passed'] else 'does not hold'} here)"
        else:
            status = "pass" if rec["passed"] else "FAIL"
        if rec is not None and rec["package"] != current:
            status += " (stale)"
        rows.append({
            "claim": c.id, "chapter": c.chapter, "source": c.source, "statement": c.statement,
            "paper": c.paper,
            "criterion": rec.get("criterion", "") if rec else "",
            "ours": f"{rec['observed']:.3g}" if rec and "observed" in rec else "not run",
            "profile": profile,
            "status": status,
        })
    return rows


def scorecard(profile: str | None = None) -> str:
    """The scorecard as an HTML table (rendered by the scorecard page)."""
    from html import escape

    rows = results(profile)
    cols = ["claim", "source", "statement", "paper", "criterion", "ours", "status"]
    widths = {"claim": "14%", "source": "12%", "statement": "38%", "paper": "12%", "criterion": "9%",
              "ours": "7%", "status": "8%"}
    head = "".join(f'<th style="width:{widths[c]}">{c}</th>' for c in cols)

    def cell(r, c):
        text = escape(str(r[c]))
        if c == "claim":
            return f'<td><code style="word-break:break-all">{text}</code></td>'
        return f"<td>{text}</td>"

    body = "".join("<tr>" + "".join(cell(r, c) for c in cols) + "</tr>" for r in rows)
    return (f'<table class="table scorecard" style="font-size:0.8em;table-layout:fixed;width:100%">'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
