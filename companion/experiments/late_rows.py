"""The rows each trained-model chapter judges again for timing (:mod:`companion.experiments.late_verdicts`): data only.

Each table maps a claim id to the entry of the chapter's summary that carries its value, {claim id: entry}, or, for a
chapter reading several recorded studies, {study: {claim id: entry}}. The comment above each table says what its
rows read and how they are judged (a late mean read at each evaluation of its window alone; a run as it ended, cut
after each evaluation of that window; a recording's curves). tests/test_late_verdicts.py holds each table to its
chapter's Check cell, and :data:`RECORDED_ROWS` to the recordables (:mod:`companion.record`). The functions the
comments name are late_verdicts'.
"""

# book/noisy_recall's rows read on late means (recall_summary)
NOISY_RECALL = {
    "recall.full_noise": "p_noise_full",
    "recall.drop_f2_correct": "p_correct_drop",
    "recall.drop_f2_gain": "drop_gain",
    "recall.attn_avoids_noise": "attn_ratio",
    "recall.prev_token_head": "prev_over_uniform",
    "recall.prev_token_sharp": "prev",
}
# book/finetune's (finetune_summary)
FINETUNE = {
    "finetune.noise_fraction": "noise_late",
    "finetune.attn_avoids_noise": "ft_ratio",
    "finetune.drop_f2_correct": "p_correct_drop",
}
# book/finetune's rows read at the end of pre-training (finetune_summary): its last evaluation, so they are judged
# again at each evaluation of pre-training's late window (phase 0)
FINETUNE_PRETRAIN = {
    "finetune.pretrain_attends_all": "pre_n_over_uniform",
    "finetune.pretrain_even": "pre_ratio",
}
# book/khop's Check cell (khop_members.summary): final accuracies, the best ones reached and the steps a level is first
# reached, read on runs as they ended; judged again as if each run had stopped at each evaluation of its late window
# (stopped_values)
KHOP = {
    "khop.direct_fails": "direct_best",
    "khop.mixture_solves": "mixture_min",
    "khop.curriculum_solves": "curriculum_final",
    "khop.hop_by_hop": "hop_gap",
    "khop.one_layer_fails": "depth_gap",
}
# book/khop's rows on its recorded rates study (khop_rates.rate_summary): the steps by which runs first reach a level,
# factors between them and counts of runs that reach it, read on the recorded runs as they ended; reported with each
# run cut at each evaluation of its late window (stopped_studies), never required: a recording is what it was
KHOP_RATES = {
    "khop.rate_direct_exp": "rate_direct_growth_low",
    "khop.rate_direct_k2_none": "rate_direct_k2_n",
    "khop.rate_mixture_linear": "rate_mixture_growth",
    "khop.rate_curriculum_linear": "rate_curriculum_growth",
}
# book/khop_stall's rows read on its recorded runs' curves alone, by study (khop_stall_paths.STOPPED and APART: the best
# k-hop accuracy of a run, counts of runs that learn the k-th hop, the continuations' accuracies, the hiding study's
# waits against the runs without it), {claim id: entry of the study's summary}; reported with each run of the study
# cut at each evaluation of its late window (stopped_studies), never required. Its other rows read probes of the
# weights at a run's end, which cuts of the curves cannot remake.
KHOP_STALL = {
    "hidden": {
        "khop.k4_hidden_seed0_learns": "hid_s0_best_hk",
        "khop.k4_hidden_seed1_learns": "hid_s1_best_hk",
        "khop.k4_hidden_seed2_learns": "hid_s2_best_hk",
        "khop.k4_hidden_every250_learns": "hid_e250_best_hk",
    },
    "hidden12": {
        "khop.k4_hidden12_seed0_stalls": "hid12_s0_best_hk",
        "khop.k4_hidden12_seed1_learns": "hid12_s1_best_hk",
        "khop.k4_hidden12_seed2_learns": "hid12_s2_best_hk",
        "khop.k4_hidden12_every250_learns": "hid12_e250_best_hk",
    },
    "hidden12_long": {
        "khop.k4_hidden12_long_seed0_stalls": "hid12l_s0_best_hk",
        "khop.k4_hidden12_long_every250_stalls": "hid12l_e250_best_hk",
    },
    "reseed": {
        "khop.k4_reseed_seed0_learns_somewhere": "rs100_learned_n",
        "khop.k4_reseed_every250_learns_mostly": "rs250_learned_n",
        "khop.k4_reseed_not_the_state": "reseed_split_n",
    },
    "reseed_long": {"khop.k4_reseed_long_learned": "rl_learned_n"},
    "delay": {"khop.k4_delay400_learns": "dl400_learned_n"},
    "escape": {
        "khop.k4_stall_persists_cumulative": "esc_cum_best_hk",
        "khop.k4_stall_persists_lr3": "esc_cum_lr3_best_hk",
        "khop.k4_stall_persists_direct": "esc_direct_best_hk",
        "khop.k4_stall_direct_forgets": "esc_direct_final_below",
        "khop.k4_stall_persists_reinit2": "esc_re2_best_hk",
        "khop.k4_stall_persists_reinit_last": "esc_relast_best_hk",
        "khop.k4_stall_last_block_spare": "esc_relast_start_below",
        "khop.k4_stall_persists_extra_block": "esc_extra_best_hk",
        "khop.k4_stall_persists_hidden": "esc_hide1_best_hk",
        "khop.k4_stall_persists_direct_long": "esc_direct_long_best_hk",
        "khop.k4_stall_hidden_direct_escapes": "esc_hide1_direct_long_best_hk",
    },
    "hidden_waits": {
        "khop.k4_hidden_seed1_faster": "hid_s1_wait_change",
        "khop.k4_hidden_seed2_slower": "hid_s2_wait_change",
    },
}
# book/fact_capacity's rows on its recorded grid, {claim id: entry of fact_capacity.grid_summary}: each run's best
# accuracy over its evaluations (training stops once it passes stop_at); reported with each run cut at each
# evaluation of its late window (fact_capacity.grid_stopped, judged_study), never required. The sweeps' rows are not:
# a trial cut shorter could change which sizes the search tries next, which no recording can redo.
FACT_CAPACITY = {
    "fc.many_heads_any_mlp": "big_heads_min",
    "fc.one_head_fails": "small_heads_max",
    "fc.mlp_trades": "mid_mlp_gain",
}
# book/khop_four_hops's Check cell: our rows on the recorded k = 4 studies, by study
# (companion.experiments.khop_four_hops.STUDIES), {claim id: entry of the study's summary, unprefixed}: read on runs as
# they ended (solved at the end, counts of such runs); reported with each run, the study's own or one its summary
# pools with, cut at each evaluation of its late window (stopped_studies), never required: a recording is what it was
KHOP_FOUR_HOPS = {
    "deep": {"khop.k4_deep_direct_fails": "direct_best", "khop.k4_deep_cumulative_min": "cumulative_min"},
    "seeds": {"khop.k4_seeds_cumulative_solved": "seeds_solved", "khop.k4_every250_solves": "seeds_alt_min"},
    "interval": {
        "khop.k4_interval_solved100": "int_solved100",
        "khop.k4_interval_solved250": "int_solved250",
        "khop.k4_interval_slower_solves_more": "int_gap_n",
        "khop.k4_interval_none_lost": "int_only_fast_n",
        "khop.k4_interval_stalls_last": "int_unsolved_early_n",
    },
    "ilong": {
        "khop.k4_interval_long_some_learn": "ilong_solved_n",
        "khop.k4_interval_long_flat_stay": "ilong_flat_solved_n",
    },
    "il250": {
        "khop.k4_interval_long250_rising_learns": "il250_solved_n",
        "khop.k4_interval_long250_flat_stays": "il250_flat_solved_n",
    },
    "wide": {
        "khop.k4_wide_solved": "wide_solved",
        "khop.k4_wide_gains": "wide_gap_n",
        "khop.k4_wide_none_lost": "wide_lost_n",
        "khop.k4_wide_stalls_last": "wide_unsolved_early_n",
    },
    "lrs": {
        "khop.k4_lr_solved": "lr_solved",
        "khop.k4_lr_gains": "lr_gap_n",
        "khop.k4_lr_none_lost": "lr_lost_n",
        "khop.k4_lr_stalls_last": "lr_unsolved_early_n",
    },
    "dbl": {
        "khop.k4_doubling_solved": "doubling_solved",
        "khop.k4_doubling_gains": "doubling_gap_n",
        "khop.k4_doubling_lost": "doubling_lost_n",
    },
}
# book/khop_starts's rows on its recorded variants' runs as they ended, by study
# (companion.experiments.khop_starts_text.STUDIES), judged as KHOP_FOUR_HOPS's; its rows on probes of a run's weights
# and on the move to the last stage read one step of each run, which a cut does not move
KHOP_STARTS = {
    "anys": {
        "khop.k4_anystart_solved": "anystart_solved_n",
        "khop.k4_anystart_early": "anystart_unsolved_early_n",
    },
    "ones": {
        "khop.k4_onestart_solved": "onestart_solved_n",
        "khop.k4_onestart_early": "onestart_unsolved_early_n",
    },
    "longs": {
        "khop.k4_longstart_solved": "longstart_solved_n",
        "khop.k4_longstart_early": "longstart_unsolved_early_n",
    },
}
# book/induction_layers's Check cell (induction_layers.summary): accuracies and divergences at the end, read on runs
# as they ended (stopped_values on induction_layers.study_runs)
INDUCTION_LAYERS = {
    "ih.two_layer_acc": "acc_two_layers",
    "ih.one_layer_acc": "acc_one_layer",
    "ih.layer_gap": "layer_gap",
    "ih.ff_kl_falls": "ff_kl_ratio",
}
# book/induction_head's Check cell (induction_head.summary): probes at the end, steps at which 0.9 is first reached,
# read on runs as they ended (stopped_values on induction_head.study_runs). Its rows at the release step of the staged
# runs (ih.ov_must_come_first, ov_alone_*, qk2_easier_first) read an evaluation before the late window, which no cut
# reaches
INDUCTION_HEAD = {
    "ih.joint_faster": "joint_lead",
    "ih.order_ov_before_qk2": "order_ov_qk2_min",
    "ih.order_qk2_probe_first": "order_ov_qk2_max",
    "ih.order_qk2_before_qk1": "order_qk2_qk1_min",
    "ih.early_positions_first": "early_gap",
    "ih.qk2_first_faster": "qk2_first_t90_gap",
}
# book/induction_random's Check cell (induction_random.random_summary): the rows read on the trained random-trigger
# model (head or bigram, the pair scores, the pair gradient, the discount edits); judged again on its weights at each
# evaluation of its late window (stopped_values of induction_random.trained_summary: the run keeps those weights)
INDUCTION_RANDOM = {
    "ih.random_head_preferred": "head_or_bigram_acc_off",
    "ih.random_bigram_when_top": "head_or_bigram_top1_ratio",
    "ih.random_first_layer_discount": "head_or_bigram_prev_attention_gap",
    "ih.random_pair_discount": "pair_discount_weaker",
    "ih.random_ambiguity": "push_balance_gap",
    "ih.random_discount_causes": "head_or_bigram_discount_removed_share",
    "ih.random_discount_doubled": "head_or_bigram_discount_doubled_growth",
}
# book/induction_random's rows on the seed recording (induction_random_seeds.random_seeds_summary) that read the
# trained models: judged with one seed's run cut at each evaluation of its late window (stopped_values of
# induction_random_seeds.stopped_summary), kept by the recording. Its rows on the early window of training read
# fractions of the steps a run ended at, which a cut moves: not the question asked here
INDUCTION_RANDOM_SEEDS = {
    "ih.random_seeds_head_preferred": "random_seeds_acc_off_min",
    "ih.random_seeds_bigram_when_top": "random_seeds_top1_ratio_min",
    "ih.random_seeds_first_layer_discount": "random_seeds_prev_attention_gap_max",
    "ih.random_seeds_pair_discount": "random_seeds_pair_discount_max",
    "ih.random_seeds_ambiguity": "random_seeds_balance_gap_min",
    "ih.random_seeds_discount_causes": "random_seeds_discount_removed_share_min",
    "ih.random_seeds_discount_doubled": "random_seeds_discount_doubled_growth_min",
}
# book/triggers' Check cell (triggers_of): the trigger contrast of the trained models, read at their last
# evaluation (after the last update); judged at each evaluation of the late window alone (views, as FINETUNE_PRETRAIN)
TRIGGERS = {"triggers.one": "ratio_one", "triggers.five": "ratio_five", "triggers.argmax": "argmax_frac"}
# book/architectures' (architectures_summary)
ARCHITECTURES = {
    "arch.mm_drop_f2": "mm_drop2_acc",
    "arch.mm_drop_f1": "mm_drop1_noise",
    "arch.ml_drop_f2": "ml_drop2_gain",
    "arch.ml_drop_f1": "ml_drop1_best",
    "arch.ml_drop_f1_quick": "ml_drop1_raise",
    "arch.lm_drop_f2": "lm_drop2_gain",
    "arch.lm_drop_f1": "lm_drop1_noise",
    "arch.nn_small_rho": "nn_small",
    "arch.nn_best_rho": "nn_gain",
}
# book/synthetic_ioi's first Check cell (ioi_adam_summary: Fig. 20)
SYNTHETIC_IOI = {
    "ioi.adam_rho": "adam_gain",
    "ioi.adam_deep_fails": "adam_deep",
}
# book/synthetic_ioi_sgd's Check cell (ioi_sgd_summary: Fig. 19)
SYNTHETIC_IOI_SGD = {
    "ioi.sgd_drop_last": "sgd_gain",
    "ioi.counting": "sgd_counting",
}

# book/synthetic_ioi's recorded runs at the larger size (catalog.IOI_LARGER): the rows read on ioi_summary's late
# means, and the one read on ioi_stability's
SYNTHETIC_IOI_LARGER = {
    "ioi.larger_sgd_drop_last": "sgd_improved_n",
    "ioi.larger_adam_rho": "adam_gain",
    "ioi.larger_adam_deep_fails": "adam_deep",
    "ioi.larger_counting": "sgd_counts_n",
}
SYNTHETIC_IOI_STABILITY = {"ioi.larger_adam_shallow_unstable": "adam3_rise"}

# book/noisy_recall's rows over noise levels: this build's run and the recordings at summaries.OTHER_ALPHAS
# (summaries.alpha_summary)
NOISY_RECALL_ALPHA = {
    "recall.alpha_noise": "alpha_noise_gap_max",
    "recall.alpha_drop_f2": "alpha_drop_min",
    "recall.alpha08_full": "alpha80_drop",
}

# book/allocation's (allocation.summary): the best learning rate's training loss, a mean of its last steps; judged at
# each of those steps alone (view_values of allocation.late_views)
ALLOCATION = {"alloc.monotone": "worst_rho", "alloc.gap": "min_gap"}

# book/scan_snap_text's Check cell (scan_snap_text.summary): attention entropies at a run's end, the attention's
# movement over the last quarter of training, the rank correlation of the rate and the final entropy; read on runs as
# they ended, judged with each run cut at each evaluation of its late window (stopped_values on
# scan_snap_text.study_runs)
SCAN_SNAP_TEXT = {
    "text.sparser_1layer": "sparser_1",
    "text.sparser_3layer": "sparser_3",
    "text.freezes": "moved_late_1",
    "text.fig10_rate": "fig10_spearman",
}

# the rows whose views a recording of each experiment keeps (companion.recorded.Recordable.views, made by record's
# registry) and book/paper_scale asks of the paper-configuration recordings (recorded_values)
RECORDED_ROWS = {
    "recall": NOISY_RECALL,
    "finetune": {**FINETUNE, **FINETUNE_PRETRAIN},
    "triggers": TRIGGERS,
    "architectures": ARCHITECTURES,
    "synthetic_ioi": {**SYNTHETIC_IOI_SGD, **SYNTHETIC_IOI},  # one recordable, both figures (ioi_summary)
    "induction_head": INDUCTION_HEAD,
    "induction_layers": INDUCTION_LAYERS,
    "khop": KHOP,
    "induction_random_seeds": INDUCTION_RANDOM_SEEDS,
    "allocation": ALLOCATION,
    "scan_snap_text": SCAN_SNAP_TEXT,
}
