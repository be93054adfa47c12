"""The k-hop recordings (``python -m companion record khop ...``): the talk's k-hop experiment and our studies of
it, declared as :class:`companion.recorded.Recordable` for the registry (:mod:`companion.record`) and for the
chapters that read them back (:func:`companion.experiments.khop_studies.recorded_runs`, ``recorded_summary``).
Their summary keys follow one scheme, :mod:`companion.experiments.khop_keys` (``explain`` reads a key in words)."""

from __future__ import annotations

from functools import partial

from companion.experiments import (
    khop,
    khop_four_hops,
    khop_members,
    khop_onset,
    khop_probes,
    khop_rates,
    khop_stall,
    khop_stall_paths,
    khop_starts,
    khop_studies,
)
from companion.recorded import Recordable


def recordables() -> dict[str, Recordable]:
    """{name: recordable} of every k-hop recording."""

    def stall(name, members, summary, var, run=khop_probes.probe_run, curves=khop_members.curves):
        """A recorded study of the chapter on the stalled k-hop run (``book/khop_stall``)."""
        return Recordable(
            name,
            "book/khop_stall",
            members,
            summary,
            curves,
            run=run,
            summary_var=var,
            member_overrides=khop_members.member_overrides,
            reads_under=khop_stall.study_sampler,
        )

    def packed(
        name, chapter, members, summary, var="summary", khop_overrides=True, run_all=khop.run_many, **kw
    ):
        """A recorded study whose runs train together, packed as replicas (``run_all``, :func:`khop.run_many`);
        its ``--set`` overrides reach each member as :func:`khop_members.member_overrides` adapts them (unchanged:
        ``khop_overrides`` false)."""
        if khop_overrides:
            kw["member_overrides"] = khop_members.member_overrides
        return Recordable(
            name, chapter, members, summary, khop_members.curves, run_all=run_all, summary_var=var, **kw
        )

    return {
        r.name: r
        for r in [
            packed("khop", "book/khop", khop_members.members, khop_members.summary),
            packed(
                "khop_rates", "book/khop", khop_rates.rate_members, khop_rates.rate_summary, "rates", False
            ),
            packed(
                "khop_seeds",
                "book/khop_four_hops",
                khop_studies.seed_members,
                khop_four_hops.seeds_summary,
                "seeds",
            ),
            packed(
                "khop_interval",
                "book/khop_four_hops",
                khop_four_hops.interval_members,
                khop_four_hops.interval_summary,
                "interval",
            ),
            packed(
                "khop_interval_long",
                "book/khop_four_hops",
                khop_four_hops.interval_long_members,
                khop_four_hops.interval_long_summary,
                "ilong",
            ),
            packed(
                "khop_interval_long250",
                "book/khop_four_hops",
                khop_four_hops.interval_long250_members,
                partial(khop_four_hops.interval_long_summary, prefix="il250_"),
                "il250",
                # packed even where the rule follows up one run: its runs repeat the packed interval study's
                run_all=partial(khop.run_many, pack_one=True),
            ),
            *(
                packed(
                    f"khop_{v.tag}",
                    chapter,
                    partial(khop_studies.variant_members, variant=v),
                    partial(khop_four_hops.variant_summary, variant=v),
                    var,
                    precheck=v.check_recording,
                )
                for v, var, chapter in (
                    (khop_studies.WIDE, "wide", "book/khop_four_hops"),
                    (khop_four_hops.LR, "lrs", "book/khop_four_hops"),
                    (khop_studies.DOUBLING, "dbl", "book/khop_four_hops"),
                    (khop_studies.ANYSTART, "anys", "book/khop_starts"),
                    (khop_studies.ONESTART, "ones", "book/khop_starts"),
                    (khop_studies.LONGSTART, "longs", "book/khop_starts"),
                )
            ),
            *(
                Recordable(
                    f"khop_{v.tag}_move",
                    "book/khop_starts",
                    partial(khop_starts.move_members, variant=v),
                    partial(khop_starts.move_summary, prefix=prefix),
                    khop_members.curves,
                    run=khop_probes.probe_run,
                    summary_var=var,
                    member_overrides=khop_members.member_overrides,
                )
                for v, prefix, var in (
                    (khop_studies.ANYSTART, "mv", "moves"),
                    (khop_studies.DOUBLING, "dmv", "dmoves"),
                    (khop_studies.ONESTART, "omv", "omoves"),
                    (khop_studies.LONGSTART, "lmv", "lmoves"),
                )
            ),
            stall("khop_probe", khop_stall.probe_members, khop_probes.probe_summary, "probe"),
            stall("khop_probe_seeds", khop_stall.seed_probe_members, khop_stall.seed_probe_summary, "sprobe"),
            stall(
                "khop_escape",
                khop_stall.escape_members,
                khop_stall.escape_summary,
                "esc",
                khop_stall.escape_run,
                khop_stall.escape_curves,
            ),
            stall("khop_hidden", khop_stall.hidden_members, khop_stall.hidden_study_summary, "hid"),
            stall(
                "khop_hidden12",
                partial(khop_stall.hidden_members, study=khop_stall.HIDDEN12),
                partial(khop_stall.hidden_study_summary, study=khop_stall.HIDDEN12),
                "hid12",
            ),
            stall(
                "khop_hidden12_long",
                partial(khop_stall.hidden_members, study=khop_stall.HIDDEN12_LONG),
                partial(khop_stall.hidden_summary, study=khop_stall.HIDDEN12_LONG),
                "hid12l",
                khop.run,
            ),
            stall(
                "khop_stage_entry",
                khop_stall_paths.stage_entry_members,
                khop_stall_paths.stage_entry_summary,
                "entry",
                khop_stall_paths.stage_entry_run,
            ),
            stall("khop_reseed", khop_stall_paths.reseed_members, khop_stall_paths.reseed_summary, "reseed"),
            stall(
                "khop_reseed_long",
                khop_stall_paths.reseed_long_members,
                khop_stall_paths.reseed_long_summary,
                "rlong",
            ),
            stall("khop_delay", khop_stall_paths.delay_members, khop_stall_paths.delay_summary, "delay"),
            stall(
                "khop_onset",
                khop_onset.onset_members,
                khop_onset.onset_summary,
                "onset",
                khop_onset.onset_run,
            ),
        ]
    }
