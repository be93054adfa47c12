"""The sentences book/induction_head writes about its recording of the order over ten seeds (issue 54's switch:
under the numpy generators the public code's parameterisation refutes our prediction at p = 0.055; under the
counter-based samplers it holds at p = 0.020). Each verdict and each bar is the claim row's
(:func:`companion.claims.prediction_outcome`, :func:`companion.claims.prediction`), never typed here.

A module apart from :mod:`companion.experiments.induction_head` because it reads the claims registry: the runs'
cache keys cover the modules they import, and must not change when a claim row does.
"""

from __future__ import annotations

from companion import claims, report
from companion.experiments.induction_head import ORDER_MODELS

ORDER_CLAIMS = {
    "ours": "ih.order_seeds_qk2_first",
    "public": "ih.order_public_qk2_first",
}  # per ORDER_MODELS key


def order_verdict_text(summary, label: str) -> str:
    """The sentence book/induction_head gives our prediction that W_QK^2's probe passes 0.9 first (the sign-test p
    below the row's bar) in parameterisation ``label`` of an :func:`~companion.experiments.induction_head.order_summary`,
    as its row (:data:`ORDER_CLAIMS`) judges the recorded p; "narrowly" where p lies within a factor two of the bar.

    >>> order_verdict_text({"order_ours_sign_p": 0.001}, "ours")
    "Our prediction holds: at this size the order of the first two probes is the reverse of the slide's."
    >>> order_verdict_text({"order_public_sign_p": 0.055}, "public")
    'That refutes our prediction of p below 0.05, narrowly.'
    >>> order_verdict_text({"order_public_sign_p": 0.02}, "public")
    'Our prediction of p below 0.05 holds here too.'

    Raises:
        ValueError: a ``label`` that is not a key of :data:`ORDER_CLAIMS`.
    """
    if label not in ORDER_CLAIMS:
        raise ValueError(f"label={label!r}: allowed {sorted(ORDER_CLAIMS)}")
    p = summary[f"order_{label}_sign_p"]
    cid = ORDER_CLAIMS[label]
    bar = claims.prediction(cid)
    outcome = claims.prediction_outcome(cid, p)
    narrowly = ", narrowly" if bar.below / 2 <= p <= 2 * bar.below else ""
    if label == "ours":
        if outcome == "holds":
            return "Our prediction holds: at this size the order of the first two probes is the reverse of the slide's."
        return f"Our prediction fails{narrowly}: at this size the sign test does not put $W^2_{{QK}}$'s probe first."
    if outcome == "holds":
        return f"Our prediction of p {bar.words()} holds here too{narrowly}."
    return f"That refutes our prediction of p {bar.words()}{narrowly}."


def slide_order_text(summary) -> str:
    """How often the slide's full order (W_OV^2, W_QK^2, W_QK^1) appears in an order summary's seeds, as the
    clause book/induction_head ends its comparison of the parameterisations with.

    >>> slide_order_text({"order_ours_slide_order": 0, "order_public_slide_order": 0, "order_ours_seeds": 10})
    "neither gives the slide's order at this size"
    >>> slide_order_text({"order_ours_slide_order": 1, "order_public_slide_order": 0, "order_ours_seeds": 10})
    "neither gives the slide's order in more than one seed at this size"
    """
    most = max(summary[f"order_{label}_slide_order"] for label in ORDER_MODELS)
    if most == 0:
        return "neither gives the slide's order at this size"
    if 2 * most < summary["order_ours_seeds"]:
        return f"neither gives the slide's order in more than {report.count_noun(most, 'seed')} at this size"
    return f"the slide's order appears in as many as {report.count_noun(most, 'seed')} at this size"
