"""FlashAttention, live: the FlashAttention story scene by scene, on numbers from our own kernels.

    streamlit run app.py

Every number on the page comes from the Triton kernels in kernels/ (flash, its FA1-order twin, the FA-3 style
Gluon kernel, naive): measured live on the GPU in front of the audience or, without a GPU that Triton can drive,
read from a recording of those kernels (results/) while the tiling animation runs the same kernel source in
Triton's CPU interpreter. This file decides what to show: `main()`, the scenes in the order of the talk (SCENES,
at the end), one function per scene. page/ is the machinery around them, story/ the numbers they quote,
viz/ the figures.

Keys for a presenter's clicker: Page Down / Page Up move between scenes, ← / → step the animation.
"""
from __future__ import annotations

import functools
import sys
from dataclasses import replace

import streamlit as st

import page
from page import Body, Stage, bound, chart, no_numbers, recording_coverage, seq_len_slider
from page.decode_trace import decode_trace
from page.settings import TRACE_SEQ_LENS, MAX_SEED
import story
import viz
from fmt import fmt_bytes, fmt_ratio, fmt_tokens, markdown_text, plotly_text

HEADLINE_COLUMNS = [1, 3]  # the metric cards, the picture
HEADLINE_SENTENCE = ("Attention builds an **N × N** matrix of scores. FlashAttention computes the same result tile by "
                     "tile in on-chip memory and never writes that matrix out.")
TILING_CAPTION_COLUMNS = [5, 1]  # the animation's caption, its download button
SEQLEN_TABS = {"memory": "Memory", "time": "Time", "throughput": "Throughput", "table": "Speedup table"}
SPEEDUP_ALIGN = ("left", "right", "right", "right", "left")  # story.SPEEDUP_COLUMNS: the numbers to the right
BACKWARD_PARTS = {"walk": "The tile walk", "memory": "Memory of a training step", "speed": "Backward TFLOPS"}
RING_VIEWS = {"ring": "The ring, step by step", "balance": "Plain or zigzag: the balance",
              "length": "Time against length"}


def main() -> None:
    # `streamlit run app.py -- --warm-up`: every slider stop of the talk's setting measured before the first view
    page.present(SCENES, choices={"tab": tuple(SEQLEN_TABS), "part": tuple(BACKWARD_PARTS),
                                   "ring": tuple(RING_VIEWS)}, warm_up="--warm-up" in sys.argv[1:])


# -- scenes ---------------------------------------------------------------------------------------

def memory_chart(stage: Stage, records: list[dict], **figure_options) -> None:
    s = stage.settings
    hbm_bytes = stage.facts.get("hbm_bytes") if stage.facts else None
    chart(page.built_figure(viz.memory_figure, records=story.with_failures(records), batch=s.batch, heads=s.heads,
                            head_dim=s.head_dim, dtype_bytes=s.dtype_bytes, seq_len_marker=s.seq_len, theme=s.theme,
                            hbm_bytes=hbm_bytes, wall=story.memory_wall(records), **figure_options),
          width=figure_options.get("width", page.BODY_WIDTH_PX))


def scene_headline(stage: Stage) -> None:
    s = stage.settings
    body = Body()
    body.say(HEADLINE_SENTENCE)
    seq_len_slider(s, body)
    records = stage.ours_over_lengths()
    numbers = stage.headline_numbers(records)
    said = recording_coverage(stage, body)
    # the picture is the biggest thing on screen: the three numbers stand in a column beside it
    cards, picture = st.columns(HEADLINE_COLUMNS, vertical_alignment="top")
    with picture:  # drawn first: the scene's picture reaches the browser before its cards
        memory_chart(stage, records, height=body.chart_px(), width=page.column_px(HEADLINE_COLUMNS, 1))
    with cards:
        if not page.controls_ready():  # the numbers come with the controls: the first view is the picture
            page.hold_place(page.metric_cards_px(3))
            return
        st.metric(f"Standard: extra memory at {fmt_tokens(s.seq_len)}", fmt_bytes(numbers.naive_bytes),
                  help="S (fp32) + P + O for every batch and head: grows as N²", border=True)
        st.metric(f"Flash: extra memory at {fmt_tokens(s.seq_len)}", fmt_bytes(numbers.flash_bytes),
                  help="O + the log-sum-exp per row: grows as N", border=True)
        # recorded with kernels changed since: said in the card's label, which has room (the caption below has none;
        # the other scenes name the files)
        earlier = not stage.live and stage.recording is not None and bool(stage.earlier_code(
            [r for r in records if r["seq_len"] == s.seq_len]))
        st.metric("Speedup · earlier kernels" if earlier else "Speedup", numbers.speedup, help=numbers.speedup_why,
                  border=True)
        if not said:  # a setting the recording lacks has no times to say (its line above says so)
            st.caption(f"Batch {s.batch} × {s.heads} heads, head_dim {s.head_dim}, {s.dtype}"
                       f"{', causal' if s.causal else ''}. Speedup {speedup_source(stage, records)}: "
                       f"{numbers.speedup_why}.")


def speedup_source(stage: Stage, records: list[dict]) -> str:
    """Where the headline's speedup was measured, short (the cards' column is narrow; the badge names the GPU)."""
    if stage.live or stage.recording is None:
        return stage.measured
    at_length = [r for r in records if r["seq_len"] == stage.settings.seq_len]
    return f"recorded {markdown_text(stage.recording.days(at_length))}"


def scene_hierarchy(stage: Stage) -> None:
    if stage.facts is None:
        st.info(f"The memory hierarchy comes from a GPU or a recording: {stage.recording_problem}.")
        return
    body = Body()
    body.say("Flash attention keeps its working set in the small, fast on-chip SRAM and reads the large, "
             "slow HBM as few times as it can." + story.hierarchy_sentence(stage.facts))
    chart(viz.hierarchy_figure(stage.facts, theme=stage.settings.theme, height=body.chart_px()))


def scene_problem(stage: Stage) -> None:
    s = stage.settings
    body = Body()
    seq_len_slider(s, body)
    scores = story.scores_memory(s.shape)
    body.say(
        f"At N = {fmt_tokens(s.seq_len)}, batch {s.batch} × {s.heads} heads, the standard kernels hold "
        f"**{fmt_bytes(scores.standard)}** (Q, K, V, S in fp32, P and O); one head's scores alone, in {s.dtype}, are "
        f"**{fmt_bytes(scores.per_head)}**. The often-quoted \"8K = 256 MB per head\" holds for fp32 scores "
        f"({fmt_bytes(scores.eight_k_fp32)}); in bf16 it is {fmt_bytes(scores.eight_k_bf16)}. Flash's extra memory is "
        f"not constant either: it grows as O(N), {fmt_bytes(scores.flash_per_head)} per head here.")
    hbm_bytes = stage.facts.get("hbm_bytes") if stage.facts else None
    chart(viz.scores_memory_figure(s.shape, hbm_bytes=hbm_bytes, theme=s.theme,
                                   wall=story.standard_wall(stage.facts, s.shape), height=body.chart_px()))


def scene_compare(stage: Stage) -> None:
    s = stage.settings
    body = Body()
    seq_len_slider(s, body)
    records = stage.ours_over_lengths()
    panels = stage.hbm_traffic(records)
    moved = story.hbm_bytes(panels, records, s.seq_len)
    naive = story.record_at(records, "naive", s.seq_len)
    block_m, block_n = panels.tiles
    standard, flash, ratio = st.columns(3)
    def badge(text: str | None) -> dict:  # a grey line under a card's number, where there is something to say
        return {"delta": text, "delta_color": "off", "delta_arrow": "off"} if text else {}

    def counted(value: str | None) -> dict:  # the GPU's count under the model's number, where there is one
        return badge(value and f"counted: {value}")

    # past the wall the card says why there is no count, where the count would be (the caption stays one line)
    naive_oom = naive is not None and naive["status"] == "oom"
    standard.metric("Standard: HBM traffic (model)", fmt_bytes(panels.naive_bytes), border=True,
                    help="S written and read in fp32, P written and read: the cost model (costmodel.naive_traffic)",
                    **(badge(f"did not run: {story.oom_word(naive)}") if naive_oom else
                       counted(moved.naive_counted and fmt_bytes(moved.naive_counted))))
    off = story.model_off(moved, panels)  # the model more than 20 % off the count: which way, and why
    flash.metric(f"Flash ({block_m}×{block_n} tiles): HBM traffic (model)", fmt_bytes(panels.flash_bytes),
                 border=True, help=" ".join(filter(None, ("L2-aware model where the GPU is known, else the no-cache "
                                                          "bound.", off))),
                 **counted(moved.flash_counted and fmt_bytes(moved.flash_counted)))
    ratio.metric(moved.ratio_title, fmt_ratio(moved.headline_ratio), border=True,
                 **(badge(moved.ratio_note) if moved.ratio_note else badge(f"model: {fmt_ratio(moved.ratio)}")))
    body.row("cards")
    titles = story.compare_titles(panels)
    figure_panels = [{"key": "naive", "title": titles["naive"], "parts": panels.naive,
                      "counted": moved.naive_counted},
                     {"key": "flash_no_cache", "title": titles["flash_no_cache"], "parts": panels.flash_no_cache}]
    if panels.flash_l2 is not None:
        figure_panels.append({"key": "flash_l2", "title": titles["flash_l2"], "parts": panels.flash_l2,
                              "counted": moved.flash_counted})
    caption = story.compare_caption(panels) + " " + story.model_vs_counted(moved, panels)
    chart(viz.compare_figure(figure_panels, theme=s.theme, height=body.chart_px(below=(page.text_rows_px(caption),))))
    st.caption(caption)


def scene_roofline(stage: Stage) -> None:
    s = stage.settings
    body = Body()
    seq_len_slider(s, body)
    if no_numbers(stage):
        return
    records = stage.every_algorithm_at_length()
    recording_coverage(stage, body)
    facts = stage.facts or {}
    peak, copy = facts.get("matmul_tflops"), facts.get("copy_gbps")
    if not peak or not copy:
        st.info("The roofline needs this GPU's measured bf16 matmul rate and copy bandwidth; "
                f"{'this recording predates them: re-record with `python -m bench`' if not stage.live else 'they were not measured'}.")
        return
    points = story.roofline_points(records, viz.short_labels())
    if not points:
        st.info(f"No kernel ran at {fmt_tokens(s.seq_len)} tokens for this setting.")
        return
    body.say("Left of the ridge a kernel waits on memory; right of it, on arithmetic. Each point: a kernel at "
             "this setting (its paragraph and verdict: below the chart).")
    caption = ("Filled: HBM bytes counted by Nsight Compute; hollow: the cost model's bytes. FLOPs: "
               "4·B·H·N²·D (halved when causal), the standard kernels' split per kernel, softmax 5 per score. "
               + story.roofs_sentence(facts, *stage.roof_sizes))
    height = body.chart_px(below=(page.ROW_PX["expander"], page.text_rows_px(caption)))
    chart(viz.roofline_figure([point.as_dict() for point in points], peak, copy, facts.get("l2_gbps"),
                              theme=s.theme, height=height, title=f"Roofline, {plotly_text(stage.measured_for(records))}",
                              width=page.BODY_WIDTH_PX))
    with st.popover("Each point in words", width="content"):  # floats over the page: opening it grows nothing
        st.markdown(story.roofline_text(points, records, facts))
        st.markdown("\n".join(f"- {line}" for line in story.roofline_verdicts(points, peak, copy, *stage.roof_sizes,
                                                                                  sheet=story.datasheet_of(facts))))
    st.caption(caption)


def scene_tiling(stage: Stage) -> None:
    s = stage.settings
    body = Body()
    # one row of controls, so the figure gets the height: what the audience reads (the view, the loop order,
    # causal, the step) in the row, the animation's size and inputs in a popover that names them
    with st.container(horizontal=True, vertical_alignment="center"):
        bound(st.segmented_control, "View", "view", s, options=tuple(page.VIEWS), required=True,
              format_func=lambda key: page.VIEWS[key].label, label_visibility="collapsed")
        bound(st.segmented_control, "Loop order", "order", s, options=tuple(page.loop_orders()), required=True,
              format_func=page.order_label, label_visibility="collapsed")
        bound(st.toggle, "Causal", "causal", s)
        with st.popover(f"N {s.trace_len} · {s.block_m}×{s.block_n} · seed {s.seed}"):
            bound(st.select_slider, "Animation length N (tokens)", "trace_len", s, options=TRACE_SEQ_LENS)
            page.tile_controls(s)
            bound(st.number_input, "Random inputs: seed", "seed", s, min_value=0, max_value=MAX_SEED)
        back, forward = st.empty(), st.empty()
    body.row("controls")
    where = stage.kernels_run
    notes_place = st.container()  # the notes on the tiles, if any, above the picture
    try:
        with st.spinner(f"Running the {page.order_label(s.order)} kernel and the naive kernels {where}…"):
            request, notes = page.traced_tiles(page.TraceRequest.of(s))
            trace = page.kernel_trace(request)
            num_steps = len(trace["steps"])
            step = min(s.step, num_steps - 1)
            if step != s.step:  # a step past the end: the link says the last one, and ◀ Step goes on from there
                page.correct_link(stage.link_settings, step=step)
            device = page.PictureDevice.of(stage.facts, recorded=not (stage.live or stage.on_gpu),
                                           residency=stage.residency() if s.view == "rereads" else (None, ""))
            words = (f"{num_steps} steps of {request.block_m}×{request.block_n} tiles over one head, head_dim "
                     f"{s.head_dim}, {s.dtype}{', causal' if s.causal else ''}, computed {where} by the "
                     f"{page.order_label(s.order)} kernel. Same inputs through the naive kernel: "
                     f"max |O_flash − O_standard| = {trace['max_abs_err']:.2e}.")
            if s.view == "tiles":
                words += " " + story.tiles_bytes_sentence(request.seq_len, request.head_dim, request.dtype,
                                                          request.causal, request.order, request.block_m,
                                                          request.block_n)
            with notes_place:
                for note in notes:
                    body.warn(note)
            height = body.chart_px(below=(page.text_rows_px(words, page.column_px(TILING_CAPTION_COLUMNS, 0)),))
            fig = page.picture(page.PictureRequest.of(request, s.view, s.theme, height, device, s.seq_len), step)
    except ValueError as why:  # settings the kernel or the animation refuse, said in their words
        st.error(f"No animation for these settings: {why}")
        return
    still = not page.VIEWS[s.view].animated  # the re-reads view is one picture of the whole run: no steps
    back.button("◀ Step", shortcut="Left", disabled=still or step == 0, on_click=page.move_step, args=(-1, num_steps))
    forward.button("Step ▶", shortcut="Right", disabled=still or step == num_steps - 1, on_click=page.move_step,
                   args=(1, num_steps))
    chart(fig, modebar=False)  # its tile legend sits where the toolbar would; the animation has its own download
    caption, download = st.columns(TILING_CAPTION_COLUMNS, vertical_alignment="center")
    caption.caption(words)
    download.download_button("Download HTML", data=functools.partial(viz.standalone_html, fig),
                             file_name=f"flash-{s.view}-{s.order}-{s.trace_len}-{request.block_m}x{request.block_n}"
                                       f"{'-causal' if s.causal else ''}.html",
                             mime="text/html", on_click="ignore", width="stretch")


def scene_backward(stage: Stage) -> None:
    """Training: the backward recomputes S and P tile by tile from O and the LSE. One view at a time: the tile walk,
    the memory a training step keeps, the measured backward TFLOPS."""
    s = stage.settings
    body = Body()
    body.say(story.backward.INTRO)
    with st.container(horizontal=True, vertical_alignment="center"):
        bound(st.segmented_control, "Show", "part", s, options=tuple(BACKWARD_PARTS), required=True,
              format_func=BACKWARD_PARTS.get, label_visibility="collapsed")
        if s.part == "walk":
            bound(st.select_slider, "Animation length N (tokens)", "trace_len", s, options=TRACE_SEQ_LENS,
                  label_visibility="collapsed", format_func=lambda n: f"N {n}")
    body.row("tabs_and_slider" if s.part == "walk" else "controls")
    if s.part == "walk":
        walk = page.backward_walk(s.trace_len, s.causal)
        caption = story.backward.walk_caption(s.trace_len, walk["block"], walk["num_blocks"], s.causal,
                                              len(walk["dkdv"]), len(walk["dq"]))
        chart(viz.backward_walk_figure(walk, walk["num_blocks"], walk["num_blocks"], theme=s.theme,
                                       height=body.chart_px(below=(page.text_rows_px(caption),))), modebar=False)
        st.caption(caption)
        return
    seq_len_slider(s, body)
    recording = stage.quoted_recording
    backward = page.backward_records(recording)
    if s.part == "memory":
        hbm_bytes = stage.facts.get("hbm_bytes") if stage.facts else None
        records = story.backward.at_setting(backward, s.shape)
        source = story.backward.source_words(recording.facts["name"] if recording else "",
                                             recording.days(records) if recording else "", stage.live,
                                             story.backward.MEMORY_NOT_LIVE)
        caption = (f"{story.backward.memory_sentence(s.shape, hbm_bytes, records)} "
                   f"{story.backward.measured_words(records, source)}")
        height = body.chart_px(below=(page.text_rows_px(caption),))
        chart(page.built_figure(viz.memory_figure, records=story.backward.with_training_failures(records),
                                batch=s.batch, heads=s.heads, head_dim=s.head_dim, dtype_bytes=s.dtype_bytes,
                                seq_len_marker=s.seq_len, theme=s.theme, hbm_bytes=hbm_bytes,
                                wall=(story.backward.training_wall(records)
                                      or story.backward.formula_wall(s.shape, hbm_bytes)), height=height, width=page.BODY_WIDTH_PX,
                                formulas=story.backward.TRAINING_FORMULAS, title=story.backward.TRAINING_TITLE,
                                legend_right=True),
              width=page.BODY_WIDTH_PX)
        st.caption(caption)
        return
    live = stage.backward_live_fits  # every bar timed now on this GPU (cached per setting and N)
    backward, forward = backward_speed_records(stage)
    if not live and not backward:
        st.info(story.backward.no_records_line(recording is not None))
        return
    bars = story.backward.tflops_bars(backward, forward, s.shape)
    drawn = story.backward.bar_records(backward, forward, s.shape)  # the bars' own records: their days, their code
    source, earlier = ((stage.measured_text, "") if live else
                       (story.backward.source_words(recording.facts["name"], recording.days(drawn), stage.live,
                                                    story.backward.live_limit_why(s.shape)),
                        stage.earlier_code(drawn)))
    caption = " ".join(filter(None, (f"{story.backward.tflops_sentence(bars, s.shape)} Source: {markdown_text(source)}.",
                                     earlier)))
    if not any(b.tflops for b in bars):  # nothing measured at this setting: the words, not an empty chart
        st.info(caption)
        return
    height = body.chart_px(below=(page.text_rows_px(caption),))
    chart(viz.backward_tflops_figure([vars(b) for b in bars], theme=s.theme, height=height))
    st.caption(caption)


def backward_speed_records(stage: Stage) -> tuple[list[dict], list[dict]]:
    """The backward scene's speed view's records, (backward, forward): every bar timed now where a live page times
    them (stage.backward_live_fits), else the quoted recording's (no forward where it has no backward records)."""
    if stage.backward_live_fits:
        measured = stage.backward_bars_live()
        return (story.backward.backward_records(measured),
                [r for r in measured if r.get("pass") != story.backward.BACKWARD])
    recording = stage.quoted_recording
    backward = page.backward_records(recording)
    return backward, (recording.records if backward else [])


def scene_seqlen(stage: Stage) -> None:
    s = stage.settings
    body = Body()
    seq_len_slider(s, body)
    if no_numbers(stage):
        return
    records = stage.ours_over_lengths()
    recording_coverage(stage, body)
    # one view at a time, chosen like the tiling scene's (and kept in the link): one chart to draw, not four
    bound(st.segmented_control, "Show", "tab", s, options=tuple(SEQLEN_TABS), required=True,
          format_func=SEQLEN_TABS.get, label_visibility="collapsed")
    body.row("tabs")
    caption = " ".join(filter(None, (story.at_length_sentence(records, s.shape),
                                     "" if stage.live else stage.earlier_code(records))))
    height = body.chart_px(below=(page.text_rows_px(caption),))
    if s.tab == "memory":
        memory_chart(stage, records, height=height, width=page.BODY_WIDTH_PX)
    elif s.tab == "time":
        chart(viz.timing_figure(story.with_failures(records), seq_len_marker=s.seq_len, theme=s.theme, height=height))
    elif s.tab == "throughput":
        chart(viz.tflops_figure(story.with_failures(records), seq_len_marker=s.seq_len, theme=s.theme, height=height))
    else:  # a figure as tall as its rows, counted in lines (viz.table): Streamlit's table sized itself
        chart(viz.table_figure(story.speedup_table_text(records), theme=s.theme, width=page.BODY_WIDTH_PX,
                               align=SPEEDUP_ALIGN, columns=story.SPEEDUP_COLUMNS), modebar=False)
    st.caption(caption)


def scene_ring(stage: Stage) -> None:
    """Past one GPU: one attention over a sequence cut across several GPUs, K/V passed round a ring, from a
    recording of bench.ring (never run on a visit: it needs several GPUs at once). One view at a time: the ring
    step by step from a traced forward, the layouts' balance, the time against the length."""
    s = stage.settings
    ring = story.ring
    body = Body()
    recording = stage.quoted_recording
    runs = list(recording.ring) if recording else []
    if stage.live:
        note = ("Ring attention needs several GPUs at once: it is recorded (`torchrun --nproc-per-node=K -m "
                "bench.ring`), not run on each visit. Showing the shipped recording.")
        st.caption(note)
        body.add_px(page.text_rows_px(note))
    body.say(ring.INTRO)
    world = ring.pick_world(runs, s.gpus)
    if world is None:
        failed = [f"{ring.failure(r)} at {fmt_tokens(r['seq_len'])} on {ring.gpus(r['world_size'])}" for r in runs]
        st.info(ring.no_runs_line(recording is not None)
                + (f" Its runs did not finish: {'; '.join(failed)}." if failed else ""))
        return
    shape = ring.pick_shape(runs, world)
    worlds = ring.ring_worlds(runs)
    with st.container(horizontal=True, vertical_alignment="center"):
        bound(st.segmented_control, "Show", "ring", s, options=tuple(RING_VIEWS), required=True,
              format_func=RING_VIEWS.get, label_visibility="collapsed")
        if len(worlds) > 1:  # the link's count where it was recorded, else the most (ring.pick_world)
            bound(st.segmented_control, "GPUs", "gpus", replace(s, gpus=world), options=worlds, required=True,
                  format_func=ring.gpus, label_visibility="collapsed")
    body.row("tabs")
    seq_len, chosen = ring.traced(runs, world, shape)
    here = ring.runs_at(runs, world, shape)
    source = f"{ring.shape_words(shape)}; {ring.source_words(here, recording.facts['name'])}"
    earlier = stage.earlier_code(here, "ring")  # ours measured with an earlier kernels/ring.py or kernel: said
    if s.ring == "length":
        hbm = recording.facts.get("hbm_bytes")
        walls = ring.memory_walls(shape, hbm, (*ring.WALL_WORLDS, *worlds))
        longest = max(ring.ring_lengths(runs, world, shape), default=None)
        caption = " ".join(filter(None, (ring.layer_sentence(runs, world, shape),
                                         ring.memory_sentence(walls, hbm, recording.facts["name"], longest),
                                         ring.length_caption(runs, world, shape),
                                         ring.sentence_case(ring.source_words(here, recording.facts["name"])) + ".",
                                         earlier)))
        chart(viz.ring_length_figure(ring.length_series(runs, shape), [vars(w) for w in walls], theme=s.theme,
                                     height=body.chart_px(below=(page.text_rows_px(caption), page.ROW_PX["expander"]))))
        st.caption(caption)
        ring_runs_popover(runs, world, shape)
        return
    if not chosen:
        st.info(f"No traced forward of ours finished on {ring.gpus(world)} at this shape ({source}): "
                f"`{ring.RING_COMMAND}` records one per layout.")
        return
    if s.ring == "balance":
        caption = " ".join(filter(None, (ring.layout_sentence(runs, world, shape, seq_len), f"Measured: {source}.",
                                         earlier)))
        chart(viz.ring_balance_figure(ring.balance_bars(chosen), theme=s.theme,
                                      height=body.chart_px(below=(page.text_rows_px(caption),
                                                                  page.ROW_PX["expander"])),
                                      title=f"Each GPU's compute in one traced forward, {fmt_tokens(seq_len)} tokens "
                                            f"on {ring.gpus(world)}"))
        st.caption(caption)
        ring_runs_popover(runs, world, shape)
        return
    shown = chosen.get("zigzag") or next(iter(chosen.values()))
    caption = " ".join(filter(None, (ring.handoff_sentence(shown), f"Measured: {source}.", earlier)))
    chart(viz.ring_steps_figure(ring.animation_runs(chosen), theme=s.theme, width_px=page.BODY_WIDTH_PX,
                                height=body.chart_px(below=(page.text_rows_px(caption), page.ROW_PX["expander"]))))
    st.caption(caption)
    ring_runs_popover(runs, world, shape)


def ring_runs_popover(runs: list[dict], world: int, shape: tuple) -> None:
    """Every run at this GPU count and shape in numbers (a popover: it floats over the page when open)."""
    with st.popover(f"Every run on {story.ring.gpus(world)} in numbers", width="content"):
        st.table([{"N": fmt_tokens(row.seq_len), "run": row.label, "time": row.time_words, "efficiency": f"{row.efficiency:.0%}" if row.efficiency is not None else "—",
                   "PyTorch ÷ ours": f"{row.vs_peer:.2f}" if row.vs_peer is not None else "—",
                   "exposed wait": story.ring.share_words(row.comm_share) if row.comm_share is not None else "—"}
                  for n in sorted({r["seq_len"] for r in story.ring.runs_at(runs, world, shape)})
                  for row in story.ring.ring_rows(runs, world, shape, n)])
        st.caption(story.ring.ROWS_NOTE)


DECODE_COLUMNS = [1, 1]  # the decode scene: the kernel's trace, the bandwidths


def decode_source(stage: Stage) -> tuple[list[dict], dict, float | None]:
    """Where the decode scene's numbers come from: the quoted recording's decode records (decode is a recording's,
    `python -m bench --decode`, never timed on a visit: live pages quote the shipped one), the facts of the GPU the
    decode bench ran on and the copy roof they are measured against (story.decode.copy_roof)."""
    timed_on = stage.quoted_recording
    facts = (timed_on.facts if timed_on else None) or {}
    return (story.decode_records(timed_on.records) if timed_on else [], facts,
            story.decode_copy_roof(timed_on.meta if timed_on else None, facts))


def scene_decode(stage: Stage) -> None:
    """Generating: one new token against the KV cache, decode's whole job a stream of the cache through HBM."""
    s = stage.settings
    body = Body()
    records, facts, copy_gbps = decode_source(stage)
    batches = story.decode_batches(records)
    with st.container(horizontal=True, vertical_alignment="bottom"):
        bound(st.select_slider, "Tokens in the KV cache", "kv_len", s, options=page.settings.DECODE_KV_LENS,
              format_func=fmt_tokens, width=1100)
        if batches:
            bound(st.segmented_control, "Sequences at once", "decode_batch", s,
                  options=sorted({*batches, s.decode_batch}), required=True)
    body.row("slider")
    if stage.live:
        st.info("Decode is recorded (`python -m bench --decode`), not timed on each visit: showing the shipped "
                "recording's numbers below when it has them; the animation runs our kernel here.")
        body.add_px(page.ROW_PX["cards_plain"] / 2)
    rows = story.decode_rows(records, s.decode_batch, s.kv_len, copy_gbps)
    if not rows:
        why = story.decode_missing_sentence(records, s.decode_batch, s.kv_len, facts.get("hbm_bytes"))
        st.info(message := f"No decode numbers here: {why}.")
        body.add_px(page.note_px(message))
    sentence = story.decode_sentence(rows, s.decode_batch, s.kv_len, facts.get("sm_count")) if rows else ""
    height = body.chart_px(below=(page.text_rows_px(sentence), page.ROW_PX["expander"]))
    left, right = st.columns(DECODE_COLUMNS)
    with left:
        try:
            with st.spinner(f"Running our decode kernel in trace mode {stage.kernels_run}…"):
                trace = decode_trace(s.seed)
            chart(viz.decode_trace_figure(trace, theme=s.theme, height=height), width=page.column_px(DECODE_COLUMNS, 0))
        except (ValueError, RuntimeError) as why:
            st.error(f"No decode animation: {why}")
    with right:
        if rows:
            shown = [{"key": r.key, "label": r.label, "time_us": r.time_us, "gbps": r.gbps,
                      "latency_bound": r.latency_bound} for r in rows]
            # decode is always a recording's (live pages quote the shipped one): when, and with which code
            when = stage.recorded_subtitle([r for r in records if r["batch"] == s.decode_batch
                                            and r["kv_len"] == s.kv_len])
            chart(viz.decode_bandwidth_figure(shown, copy_gbps, theme=s.theme, height=height,
                                              title=f"batch {s.decode_batch} × {fmt_tokens(s.kv_len)} tokens: "
                                                    f"time per token, bandwidth", subtitle=when),
                  width=page.column_px(DECODE_COLUMNS, 1))
    if sentence:
        st.caption(sentence)
    with st.popover("The KV cache of each model against this GPU's memory", width="content"):
        hbm = (stage.facts or {}).get("hbm_bytes")
        st.table(story.kv_cache_table(story.kv_cache_rows(page.settings.MODEL_PRESETS, hbm, s.kv_len), s.kv_len, hbm))
        st.caption("bf16, K and V of every layer and K/V head; all of the device's memory, the model's weights left "
                   "aside: an upper bound of what a serving system can give the cache.")


def scene_evolution(stage: Stage) -> None:
    s = stage.settings
    body = Body()
    seq_len_slider(s, body)
    if no_numbers(stage):
        return
    records = stage.every_algorithm_at_length()
    said = recording_coverage(stage, body)
    history = stage.records_for(story.prefill_algorithms(), page.settings.SEQ_LENS) if not stage.live else None
    measured = [{**point, "label": viz.algorithm_label(point["algorithm"])}
                for point in story.evolution_points(records, s.seq_len, history)]
    drawn = story.drawn_records(records, measured)  # the points' own records: the chart dates these, not the others
    recorded = bool(stage.recording and stage.facts and not said)  # a setting the recording lacks has no gap to split
    failed = story.failed_here_sentence(records, s.seq_len, viz.short_labels(), (stage.facts or {}).get("hbm_bytes"))
    caption, gap = " ".join(filter(None, (story.ratio_sentences(measured, viz.PUBLISHED, stage.gpu_name,
                                                                same_gpu=recorded), failed))), None
    if recorded:
        gap = story.fa1_gap(stage.recording.records, s.shape, stage.facts.get("sm_count"),
                           stage.facts.get("copy_gbps"))
        caption = " ".join(filter(None, (caption, story.runs_sentence(stage.recording.meta),
                                         stage.earlier_code(drawn))))
    below = (page.text_rows_px(caption),) if caption else ()
    chart(viz.evolution_figure(measured, theme=s.theme, measured_label=stage.measured_for(drawn),
                               height=body.chart_px(below=(*below, page.ROW_PX["expander"]))))
    if caption:
        st.caption(caption)
    with st.container(horizontal=True):  # one row of popovers: they float over the page when open
        if gap:
            with st.popover("FA-1's loop order against FA-2's: where the time goes", width="content"):
                st.markdown(gap.sentence)
        with st.popover("Sources of the published numbers", width="content"):
            st.markdown("\n".join(f"- **{entry['version']}** ({entry['year']}, {entry['gpu']}): {entry['citation']}. "
                                  f"{entry['note']}" for entry in viz.PUBLISHED))


ABLATION_COLUMNS = [3, 2]  # the ladder's bars, the selected step's Proton lanes


def scene_ablation(stage: Stage) -> None:
    """FA-3, idea by idea: each step of our ladder measured side by side in one run, the paper's steps beside them,
    and the selected step's Proton lanes."""
    s = stage.settings
    body = Body()
    source = page.ladder_source(stage)
    bars = story.bars(source.records)
    names = story.step_names()
    selected = names[min(s.rung, len(names) - 1)]
    if story.has_numbers(bars):
        body.say(f"{story.ladder_sentence(bars, markdown_text(source.gpu))} "
                 f"Each bar: TFLOPS (under its name: ÷ the step before), {markdown_text(source.label)}, "
                 f"{story.ablation.SHAPE_TEXT}." + (f" Not live: {source.live_problem}." if source.live_problem else ""))
    else:
        body.say(story.no_records_sentence(source.live_problem))
    bound(st.segmented_control, "Proton lanes of the step", "rung", s, options=list(range(len(names))),
          format_func=lambda i: story.ablation.SHORT[names[i]], required=True, label_visibility="collapsed")
    body.row("tabs")
    programs = source.recording.ladder_programs if source.recording else {}
    program = programs.get(selected)
    shipped = source.recording.programs if source.recording else ()  # the inside scene's: another recording
    caption = (f"**{markdown_text(selected)}**: {story.what_changed(selected)} "
               f"{story.step_lanes_sentence(program, shipped, selected)} "
               "The buttons above choose the step whose Proton lanes show."
               + ("" if source.live or source.recording is None else
                  f" {story.ablation.other_run_sentence(bars, source.recording.records)}".rstrip())
               + ("" if source.live else f" {stage.earlier_code(ablation_records(stage, source))}".rstrip()))
    height = body.chart_px(below=(page.text_rows_px(caption), page.ROW_PX["expander"]))
    published = f"FA-3 paper, {story.ablation.PUBLISHED_GPU} (published, another GPU)"
    bars_col, lanes_col = st.columns(ABLATION_COLUMNS)
    with bars_col:
        chart(viz.ablation_figure(story.chart_data(bars, selected), theme=s.theme, height=height,
                                  measured_label=f"ours, {source.label}", published_label=published),
              width=page.column_px(ABLATION_COLUMNS, 0))
    with lanes_col:
        title = story.step_lanes_title(selected, program)
        if program is not None:
            chart(viz.phases_figure([{"title": "", "lanes": program.lanes}], theme=s.theme, height=height, title=title,
                                    legend_per_row=2),
                  width=page.column_px(ABLATION_COLUMNS, 1))
        else:
            st.info(f"{markdown_text(title)}: `{story.ablation.BENCH_COMMAND}` records each step's lanes with Proton "
                    f"on a Hopper GPU.")
    st.caption(caption)
    with st.container(horizontal=True):
        with st.popover(FP8_POPOVER, width="content"):
            fp8_view(stage)
        with st.popover("Each step, and the published steps", width="content"):
            st.markdown("\n".join(f"- **{markdown_text(name)}**: {what}" for name, what in story.ablation.STEPS))
            st.markdown("\n".join(f"- {p.label}: **{p.text} TFLOPS** ({p.note})" for p in story.PUBLISHED_STEPS)
                        + f"\n\n{story.ablation.PUBLISHED_SOURCE}; {story.ablation.PUBLISHED_GPU}, head_dim 128, "
                          f"N = 8K, FP16, forward.")


def ablation_records(stage: Stage, source) -> list[dict]:
    """The recorded records the ablation scene shows: the ladder's and, unless FP8 is measured live, the FP8
    popover's (its caption has no room for a line of its own: the scene's caption speaks for both)."""
    fp8 = list(stage.quoted_recording.fp8) if stage.quoted_recording and not stage.live else []
    return list(source.records) + fp8


FP8_POPOVER = "FA-3's third idea: FP8"
FP8_CHART_PX, FP8_CHART_HEIGHT_PX = 620, 220  # the popover's chart, in design px (the popover is ~700 px wide)


def fp8_view(stage: Stage) -> None:
    """FA-3's third idea: the presenter picks the planted outliers (the FA-3 paper's, or harsher) and turns the
    rotation on and off; each FP8 variant's error against float64 against the speed it gained over bf16, measured
    (live, recorded, or on the CPU the emulation's errors only)."""
    recording = stage.quoted_recording
    default = story.fp8.default_level(None if stage.live or recording is None else recording.fp8)
    with st.container(horizontal=True, vertical_alignment="bottom"):
        level = st.segmented_control("Planted outliers (on 0.1 % of entries)", list(story.fp8.OUTLIER_LEVELS),
                                     default=default, key="fp8_outliers", required=True)
        rotation = st.toggle("Rotate Q and K (random-sign Hadamard)", key="fp8_rotation")
    source = page.fp8_source(stage, level)
    points = list(source.points)
    words = story.fp8.rotation_sentence(points, level, rotation) if points else story.fp8.no_points_sentence(level)
    st.markdown(words)
    st.caption(f"Source: {markdown_text(source.label)}, {story.fp8.SHAPE_TEXT[source.kind]}."
               + (f" {source.problem}" if source.problem else ""))
    if points:
        chart(viz.fp8_figure(points, rotation, theme=stage.settings.theme, height=FP8_CHART_HEIGHT_PX,
                             source_label=plotly_text(source.label)), width=FP8_CHART_PX)


def scene_timeline(stage: Stage) -> None:
    s = stage.settings
    if stage.live:
        try:
            with st.spinner(f"Timing every program of the flash kernel on {stage.gpu_name}…"):
                timeline = page.live_sm_timeline(s.seq_len, s.batch, s.heads, s.head_dim, s.dtype, s.causal)
        except (ValueError, RuntimeError) as why:  # RuntimeError: torch's out-of-memory at a huge setting
            st.error(f"No SM timeline for these settings: {why}")
            return
    elif stage.recording and stage.recording.timelines:
        # the recording holds a few timelines; show the one closest to the current setting
        timeline = min(stage.recording.timelines,
                       key=lambda t: (bool(t["causal"]) != s.causal, abs(t["seq_len"] - s.seq_len)))
    else:
        st.info(f"The SM timeline needs a GPU or a recording with timelines: "
                f"{stage.recording_problem or 'this recording has none'}.")
        return
    body = Body()
    days, earlier = (("", "") if stage.live else  # a recorded one: its own day, and whether its code has changed since
                     (stage.recording.days([timeline]), stage.earlier_code([timeline], "timelines")))
    caption = " ".join(filter(None, (story.timeline_caption(timeline, s.shape, stage.live, days), earlier)))
    st.caption(caption)
    body.add_px(page.text_rows_px(caption))
    stats = story.timeline_stats(timeline)
    programs, waves, busy = st.columns(3)
    programs.metric("Programs (Q blocks × batch × heads)", f"{stats['programs']:,}", border=True)
    waves.metric(f"Waves: {timeline['sm_count']} SMs × {stats['max_per_sm']} resident", f"{stats['waves']:.1f}",
                 border=True, help="programs ÷ (SMs × the most programs one SM ran at once, measured here)")
    busy.metric("SMs busy", f"{stats['utilization']:.0%}", border=True)
    body.row("cards_plain")
    chart(viz.sm_timeline_figure(timeline, stats, theme=s.theme, height=body.chart_px()))


def scene_inside(stage: Stage) -> None:
    """One program of each flash kernel from the inside: what each warpgroup did over time (Proton)."""
    s = stage.settings
    body = Body()
    recording = stage.quoted_recording
    if stage.live:
        live_note = ("Recorded with Proton's instrumentation (`python -m bench --phases`), not measured on each visit: "
                     "an instrumented launch compiles kernels of its own. Showing the shipped recording.")
        st.caption(live_note)
        body.add_px(page.text_rows_px(live_note))
    phases = recording.phases if recording else []
    if not phases:
        st.info("This recording has no phases: its kernels were not recorded with Proton (`python -m bench "
                f"--phases` records them on a Hopper GPU{'' if stage.on_gpu else '; on this CPU Proton cannot run'}).")
        return
    shape = phases[0]
    rates = [r for r in story.prefill_records(recording.records) if (r["seq_len"], r["batch"], r["heads"], r["head_dim"], r["causal"]) ==
             (s.seq_len, s.batch, s.heads, shape["head_dim"], shape["causal"])]  # the kernels' rates at the talk's N
    names = {**viz.short_labels(), "fa2": "flash (ours), FA-2 order"}
    kernels = story.phase_kernels(recording.programs, rates, recording.facts, names)
    body.say(story.phases_sentence(kernels))
    cards = st.columns(len(kernels))
    for card, k in zip(cards, kernels):
        overlap = f"; softmax under the other's GEMM {k.softmax_overlap:.0%}" if k.softmax_overlap is not None else ""
        card.metric(f"{k.label}: time inside a GEMM scope", f"{k.gemm_busy:.0%}", border=True,
                    help=story.busy_sentence(k), delta=f"one program, {k.microseconds:,.1f} µs{overlap}",
                    delta_color="off", delta_arrow="off")
    body.row("cards")
    recorded = story.ring.sentence_case(recording.recorded_label(list(phases)))  # "Recorded on X, 2026-12-02"
    caption = " ".join(filter(None, (
        f"{markdown_text(recorded)}: one launch of each kernel at batch {shape['batch']} × {shape['heads']} heads, "
        f"N = {fmt_tokens(shape['seq_len'])}, head_dim {shape['head_dim']}, instrumented with Proton (scopes on the "
        f"kernels' phase comments; each card's help (?) checks its number against the kernel's measured rate).",
        story.ablation.ladder_recording_sentence(recording.programs, recording.ladder_programs),
        stage.earlier_code(list(phases), "phases"))))
    chart(viz.phases_figure([{"title": f"{k.label}: CTA {k.cta} on SM {k.sm}", "lanes": k.lanes} for k in kernels],
                            theme=s.theme, height=body.chart_px(below=(page.text_rows_px(caption),))))
    st.caption(caption)


def scene_takeaways(stage: Stage) -> None:
    s = stage.settings
    records = stage.ours_over_lengths()
    at_length = stage.every_algorithm_at_length()
    error = None
    try:
        with st.spinner(f"Running both kernels on the same inputs {stage.kernels_run}…"):
            flash = replace(page.TraceRequest.of(s), order="fa2")  # the teaching kernel, whatever the view's order
            error = page.kernel_trace(page.traced_tiles(flash)[0])["max_abs_err"]
    except ValueError as why:
        st.error(f"No exactness check for these settings: {why}")
    numbers = {scene.key: number for number, scene in enumerate(SCENES, start=1)}
    panels = stage.hbm_traffic(records)
    quoted = stage.quoted_recording
    decoded, _, copy_gbps = decode_source(stage)
    backward, forward = backward_speed_records(stage)
    evidence = story.Evidence(records, at_length, panels, stage.facts, stage.gpu_name, error, s.trace_len,
                              quoted.ring if quoted else (),
                              decode=story.DecodeEvidence(tuple(decoded), s.decode_batch, s.kv_len, copy_gbps),
                              backward=story.BackwardEvidence(tuple(page.backward_records(quoted)), tuple(backward),
                                                              tuple(forward), stage.backward_live_fits))
    slides = story.takeaway_slides(evidence, s.shape, numbers)
    for row in range(0, len(slides), 3):  # slides: a number and a line each, three to a row
        for column, slide in zip(st.columns(3), slides[row:row + 3]):
            with column.container(border=True, height="stretch"):
                st.metric(slide.title, slide.number)
                st.markdown(f"{slide.line} · scene {slide.scene}")
    with st.popover("Each takeaway in words", width="content"):  # floats over the page: opening it grows nothing
        points = story.takeaways(evidence, s.shape, numbers)
        st.markdown("\n".join(f"{number}. {point}" for number, point in enumerate(points, start=1)))


# -- the talk, in order -------------------------------------------------------------------------------

SCENES = (
    page.Scene("headline", "FlashAttention in one picture", scene_headline),
    page.Scene("hierarchy", "The GPU memory hierarchy", scene_hierarchy),
    page.Scene("problem", "The problem: N × N scores", scene_problem),
    page.Scene("compare", "Standard vs flash, side by side", scene_compare),
    page.Scene("roofline", "Memory-bound or compute-bound: the roofline", scene_roofline),
    page.Scene("tiling", "The tiling, step by step", scene_tiling),
    page.Scene("backward", "Training: the backward pass", scene_backward),
    page.Scene("seqlen", "Sequence length", scene_seqlen),
    page.Scene("ring", "Past one GPU: ring attention", scene_ring, animation="recorded"),
    page.Scene("decode", "Generating: one token against the cache", scene_decode),
    page.Scene("evolution", "FlashAttention 1 → 4", scene_evolution),
    page.Scene("ablation", "FA-3, idea by idea", scene_ablation),
    page.Scene("timeline", "Work on the SMs", scene_timeline),
    page.Scene("inside", "Inside one program: FA-2 and FA-3", scene_inside),
    page.Scene("takeaways", "Takeaways", scene_takeaways),
)
SCENE_KEYS = tuple(scene.key for scene in SCENES)


if __name__ == "__main__":
    main()
