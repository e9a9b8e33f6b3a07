// The page's own script. page/script.py writes it into the page, in a hidden row at the top of the main
// area, through st.html with unsafe_allow_javascript: `(this function)(the run's data)` in a script element.
// It runs in the page, not in an iframe, and runs again only when its data changes. (Not a Streamlit component: the component runtime
// is 4 JS chunks, the component's and Arrow's, that the first view would load for this script alone.)
// Streamlit cleans its HTML with DOMPurify, which drops a script with a "<" before a letter, "/" or "!":
// none here.
//
// It tells the app what it sees through the link, the way Streamlit follows the browser's back and forward
// buttons (the address changes, then a popstate event: the app reruns with the new query): `window=WxH` (the
// window's size) and `drawn=WxH` (the session's first picture is on screen, in a window of that size). The app
// takes both out of the link at the start of its run (page.script.take_reports).
//
// - The window's size goes to the app: the charts are built for it, the way the page's CSS sizes text
//   from the window's height (page/script.py PAGE_STYLE).
// - A session's first view (page/script.py FIRST_VIEW_STEPS): "drawn" once the charts built for this
//   window are on screen, which brings the controls.
// - ← / → (the animation's step) and Page Up / Page Down (the scene) are gathered here, not sent to the
//   app one press at a time: each press moves the target, and the link is written (the app reruns) once
//   the keys stop, or every COMMIT_EVERY_MS while one is held. A held key or a fast clicker lands where
//   the presses add up to, and the server reruns a few times, not once per press.
// - Space plays and pauses the tiling animation, as a clicker's "start" key expects: it presses the
//   chart's own play (1×) and pause buttons. Keys typed into inputs and sliders are left alone.
// - Where the animation stops (paused, ended, or moved with its slider), that step goes into the URL's
//   `step`, the way Streamlit itself follows the browser's back and forward buttons (the address
//   changes, then a popstate event): the app reruns at that step, so "Step ▶"/→ go on from the frame
//   on screen and the link shows it. Play then goes on from that step too.
// - plotly.js rejects the promise of an animation that pause cuts short, with no reason, and its
//   play buttons leave that rejection unhandled: the page handles it (nothing else rejects with
//   `undefined` here), so the console stays clean.
(function flashLivePage(data) {
  const DRAWN_WAIT_MS = 3000;
  // Streamlit may run this again (new data after a rerun) before the last run's cleanup: one set of
  // listeners per page, whatever happens
  if (window.__flashLivePage) window.__flashLivePage();

  // -- telling the app: new values in the link, then the event Streamlit reruns the app on ----------------
  const setLink = (values) => {
    const url = new URL(window.location.href);
    let changed = false;
    for (const [name, value] of Object.entries(values)) {
      if (value === null || url.searchParams.get(name) === value) continue;
      url.searchParams.set(name, value);
      changed = true;
    }
    if (!changed) return;
    if (writeLink(url.toString())) window.dispatchEvent(new PopStateEvent("popstate", { state: window.history.state }));
  };
  // Some embedded browsers refuse history.replaceState (it throws): there the address moves with pushState, and
  // Streamlit's own replaceState calls (the address after a popstate: a throw there stops the app with "Bad message
  // format") go the same way from then on; where both are refused, the address itself (a new page load at that link,
  // which reads the same values). Never an error that stops this script: the controls come all the same.
  const writeLink = (url) => {
    try {
      window.history.replaceState(window.history.state, "", url);
      return true;
    } catch (refused) { /* below */ }
    try {
      window.history.pushState(window.history.state, "", url);
    } catch (refusedToo) {
      try { window.location.replace(url); } catch (refusedAll) { /* nothing more this page can do */ }
      return false;
    }
    if (!window.history.__flashLivePushes) {
      const replace = window.history.replaceState;
      window.history.replaceState = function (...args) {
        try { return replace.apply(window.history, args); } catch (refused) { return window.history.pushState(...args); }
      };
      window.history.__flashLivePushes = true;
    }
    return true;
  };
  const sizeOf = (size) => `${size.width}x${size.height}`;

  // -- the animated chart: which it is, and stopping it where it is ----------------------------------------
  const animated = () => [...document.querySelectorAll(".js-plotly-plot")]
    .find((plot) => plot.querySelector(".updatemenu-button"));
  const pauseButton = (chart) => [...chart.querySelectorAll(".updatemenu-button")]
    .find((b) => b.textContent.includes("pause"));
  // stop a playing animation at the frame on screen (its own pause button, then every loop it has: below); that
  // frame, as the link's step
  const stopPlaying = (chart) => {
    chart.__playing = false;
    const pause = pauseButton(chart);
    if (pause) pause.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    if (chart.__canvas) endLoops(chart, { all: true });
    return chart.__frameOnScreen === undefined ? null : String(chart.__frameOnScreen);
  };

  // -- the window's size, for the charts ---------------------------------------------------------
  let reported = data && data.viewport ? sizeOf(data.viewport) : "";
  let resizeTimer;
  let resizedAtStep = null;  // the frame a resize stopped the animation at: it goes into the link with the window
  const report = () => {
    const size = { width: window.innerWidth, height: window.innerHeight };
    const key = sizeOf(size);
    const step = resizedAtStep;
    resizedAtStep = null;
    if (key === reported || !size.width || !size.height) {
      if (step !== null) setLink({ step });
      return;
    }
    reported = key;
    setLink({ window: key, step });
  };
  // A resize redraws the charts at once (Streamlit), a playing animation's included, and plotly's animation loop then
  // runs on into the redrawn chart, throwing at every frame: so it stops first, at its frame, which the rerun for the
  // new window then shows (not the link's older step)
  const onResize = () => {
    const chart = animated();
    if (chart && chart.__playing === true) resizedAtStep = stopPlaying(chart);
    window.clearTimeout(resizeTimer);
    resizeTimer = window.setTimeout(report, 250);
  };
  window.addEventListener("resize", onResize);

  // -- a session's first view (page/script.py): once the charts built for this window are drawn, say so; the
  // next run brings the controls. The first run builds them for the design window: in a window of that size
  // they are already the right ones, so the window is reported only with "drawn" (one rerun, after the picture);
  // in any other, at once (the next run builds them for it).
  const firstView = data && data.first_view;
  const design = data && data.design;
  const designWindow = () => !!design
    && Math.min(window.innerWidth / design.width, window.innerHeight / design.height) === 1;
  const waitForPicture = firstView === "picture" || (firstView === "window" && designWindow());
  if (!(firstView === "window" && waitForPicture)) report();
  let drawnTimer = 0;
  if (waitForPicture) {
    let idleSince = 0;
    const pictureDrawn = () => {
      const app = document.querySelector('[data-testid="stApp"]');
      const idle = app && app.getAttribute("data-test-script-state") === "notRunning";
      idleSince = idle ? (idleSince || performance.now()) : 0;
      const charts = [...document.querySelectorAll('[class*="st-key-canvas-chart-"]')];
      const drawn = (chart) => chart.querySelector(".js-plotly-plot .main-svg")
        && getComputedStyle(chart).visibility === "visible";
      // a chart that never draws (its code failed) holds the controls back for DRAWN_WAIT_MS at most
      if (idle && (charts.every(drawn)
                   || performance.now() - idleSince > DRAWN_WAIT_MS)) {
        drawnTimer = 0;
        // "drawn" carries the window's size, and a window resized since it was reported comes with it: one
        // change of the link, one rerun (page/script.py)
        const key = sizeOf({ width: window.innerWidth, height: window.innerHeight });
        const resized = reported && key !== reported;
        reported = key;
        setLink({ drawn: key, window: resized ? key : null });
        return;
      }
      drawnTimer = window.setTimeout(pictureDrawn, 40);
    };
    pictureDrawn();
  }

  // -- the animation and the link ----------------------------------------------------------------
  const urlStep = () => new URL(window.location.href).searchParams.get("step");
  const goToStep = (step) => { if (step !== undefined) setLink({ step: String(step) }); };
  // plotly.js internals this script reads, named in one place: a drawn chart's full layout (which frame is on
  // screen), its animation state (its frames, and the loop that plays them) and its event emitter (whether our
  // listeners are still on it). Missing ones are a console error, which fails the browser tests loudly when a
  // plotly upgrade moves them.
  const plotlyPrivate = {
    layout: (chart) => chart._fullLayout,
    // the chart's animation state: its frames, the frames still to play (_frameQueue) and its loop's next browser
    // frame (_animationRaf)
    animation: (chart) => chart._transitionData,
    frameCount: (chart) => {
      const frames = chart && chart._transitionData && chart._transitionData._frames;
      return frames ? frames.length : 0;
    },
    looping: (state) => Boolean(state._animationRaf),
    endLoop: (state) => {
      if (Array.isArray(state._frameQueue)) state._frameQueue.length = 0;
      const running = plotlyPrivate.looping(state);
      if (running) window.cancelAnimationFrame(state._animationRaf);
      state._animationRaf = null;
      return running;
    },
    listening: (chart, name, handler) => Boolean(chart._ev) && chart._ev.listeners(name).includes(handler),
    check: (chart) => {
      const missing = ["_fullLayout", "_ev", "_transitionData"].filter((name) => !(name in chart));
      if (missing.length) console.error(`plotly internals moved: ${missing.join(", ")}`);
    },
  };
  // plotly's animation loop plays on the animation state the chart had when Play was pressed; it asks for its next
  // browser frame before it draws this one, and ends only at a tick that finds nothing left to play. Streamlit
  // redraws a chart with Plotly.react (a resize does), which gives the chart a new state and leaves the loop on the
  // old one running: it drew its old frames into the redrawn chart and, once the chart left the page, threw at every
  // browser frame for good (CI saw 77 "e.emit is not a function" after one resize). So the page remembers every
  // state a chart has had and ends the loop of each that is no longer the chart's: at each frame drawn, at each
  // bind (300 ms), and all of them when it stops the animation or the chart leaves the page. A loop ended that way
  // was playing: the animation has stopped at the frame on screen, which goes into the link as a pause's does
  // (unless a loop of the chart's own state plays on).
  const endLoops = (chart, { all = false } = {}) => {
    const { states } = chart.__canvas;
    const current = plotlyPrivate.animation(chart);
    let ended = false;
    for (const state of states) {
      if (all || state !== current) ended = plotlyPrivate.endLoop(state) || ended;
      if (state !== current) states.delete(state);
    }
    if (current) states.add(current);
    if (ended && !all && !(current && plotlyPrivate.looping(current))) chart.__canvas.stopped();
  };
  const bound = new Set();  // the animated charts bound, until they leave the page
  const leaving = new MutationObserver(() => {
    for (const chart of bound) {
      if (chart.isConnected) continue;
      bound.delete(chart);
      endLoops(chart, { all: true });
    }
  });
  leaving.observe(document.body, { childList: true, subtree: true });
  const keepStep = (chart) => {
    // A chart drawn at a step (the app's start_step) has not animated yet: tell plotly which frame is on
    // screen, so that Play (`fromcurrent`) goes on from there rather than from the first step.
    plotlyPrivate.check(chart);
    const layout = plotlyPrivate.layout(chart);
    if (layout && layout._currentFrame === undefined && urlStep() !== null) {
      layout._currentFrame = urlStep();
    }
    // the handlers live on the chart element; a redraw (a new plot in the same element) drops plotly's
    // listeners, so listen again whenever ours are gone
    if (!chart.__canvas) {
      chart.__canvas = {
        states: new Set(),  // the animation states the chart has had (endLoops)
        // a step the keys have taken (→ while it played) is the step, whatever frame plotly still draws
        frame: (frame) => {
          if (nav.step === null) chart.__frameOnScreen = frame.name;
          endLoops(chart);
        },
        stopped: () => {
          chart.__playing = false;
          // let plotly finish the frame it is drawing before the rerun redraws the chart
          window.requestAnimationFrame(() => window.requestAnimationFrame(() => {
            if (!chart.__playing && nav.step === null && resizedAtStep === null) goToStep(chart.__frameOnScreen);
          }));
        },
      };
    }
    bound.add(chart);
    endLoops(chart);
    const { frame, stopped } = chart.__canvas;
    if (plotlyPrivate.listening(chart, "plotly_animated", stopped)) return;
    chart.on("plotly_animatingframe", frame);
    chart.on("plotly_animated", stopped);
    chart.on("plotly_animationinterrupted", stopped);
  };
  const bind = () => { const chart = animated(); if (chart) keepStep(chart); };
  bind();
  const binder = window.setInterval(bind, 300);  // plotly draws the chart late, and reruns redraw it

  // -- ← / → and Page Up / Page Down, gathered ------------------------------------------------------
  const QUIET_MS = 180;        // the keys have stopped: write the link
  const COMMIT_EVERY_MS = 600; // a key held down: write the link this often, so the page follows
  const scenes = (data && Array.isArray(data.scenes)) ? data.scenes : [];
  const nav = window.__flashLiveNav || (window.__flashLiveNav = { step: null, scene: null, quiet: 0, since: 0 });
  const commit = () => {
    window.clearTimeout(nav.quiet);
    nav.quiet = 0;
    nav.since = 0;
    const values = { scene: nav.scene, step: nav.step === null ? null : String(nav.step) };
    nav.step = null;
    nav.scene = null;
    setLink(values);
  };
  const later = () => {
    const now = performance.now();
    if (!nav.since) nav.since = now;
    window.clearTimeout(nav.quiet);
    if (now - nav.since >= COMMIT_EVERY_MS) { commit(); return; }
    nav.quiet = window.setTimeout(commit, QUIET_MS);
  };
  const moveStep = (by) => {
    const chart = animated();
    const count = plotlyPrivate.frameCount(chart);
    if (!count) return false;  // no animation on this scene: the key means nothing here
    // while it plays, the frame on screen is where the step goes on from (the link still has the step it started at):
    // it stops there first
    const playing = chart.__playing === true ? stopPlaying(chart) : null;
    const from = nav.step !== null ? nav.step : Number(playing || urlStep() || chart.__frameOnScreen || 0);
    const to = Math.min(Math.max(from + by, 0), count - 1);
    nav.step = to;
    chart.__frameOnScreen = String(to);
    chart.__playing = false;
    return true;
  };
  const moveScene = (by) => {
    if (!scenes.length) return false;
    const current = nav.scene !== null ? nav.scene : (new URL(window.location.href).searchParams.get("scene"));
    const index = Math.max(scenes.indexOf(current), 0);
    nav.scene = scenes[Math.min(Math.max(index + by, 0), scenes.length - 1)];
    nav.step = null;  // a new scene starts its animation where the link says
    return true;
  };
  const NAV_KEYS = { ArrowRight: () => moveStep(1), ArrowLeft: () => moveStep(-1),
                     PageDown: () => moveScene(1), PageUp: () => moveScene(-1) };
  const typing = (target) => target && (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName)
    || target.getAttribute("role") === "slider");
  const onNavKey = (event) => {
    const move = NAV_KEYS[event.key];
    if (!move || event.altKey || event.ctrlKey || event.metaKey || typing(event.target)) return;
    if (!move()) return;
    event.preventDefault();
    event.stopImmediatePropagation();  // the buttons' own shortcuts would rerun the app once per press
    later();
  };

  const onKey = (event) => {
    if (event.code !== "Space" || event.repeat) return;
    if (typing(event.target)) return;
    const chart = animated();
    if (!chart) return;
    const buttons = [...chart.querySelectorAll(".updatemenu-button")];
    const playing = chart.__playing === true;
    const wanted = playing ? buttons.find((b) => b.textContent.includes("pause"))
                           : buttons.find((b) => b.textContent.trim().startsWith("▶ 1×")) || buttons[0];
    if (!wanted) return;
    event.preventDefault();
    keepStep(chart);
    chart.__playing = !playing;
    wanted.dispatchEvent(new MouseEvent("click", { bubbles: true }));
  };
  // a click on a play button marks the chart as playing, so that Space pauses it; and (this listener runs in
  // the capture phase, before plotly's own) tells plotly the frame on screen first, so that a Play pressed the
  // moment a redrawn chart appears goes on from its step, not from step 1 (the timer may not have run yet)
  const onClick = (event) => {
    const button = event.target.closest && event.target.closest(".updatemenu-button");
    const chart = button && button.closest(".js-plotly-plot");
    if (!chart) return;
    keepStep(chart);
    chart.__playing = !button.textContent.includes("pause");
  };
  const onRejection = (event) => { if (event.reason === undefined) event.preventDefault(); };
  window.addEventListener("keydown", onNavKey, true);  // before the page's own key handlers
  document.addEventListener("keydown", onKey, true);
  document.addEventListener("click", onClick, true);
  window.addEventListener("unhandledrejection", onRejection);

  const cleanup = () => {
    if (window.__flashLivePage === cleanup) window.__flashLivePage = undefined;
    window.removeEventListener("resize", onResize);
    leaving.disconnect();
    window.clearInterval(binder);
    window.clearTimeout(drawnTimer);
    window.removeEventListener("keydown", onNavKey, true);
    document.removeEventListener("keydown", onKey, true);
    document.removeEventListener("click", onClick, true);
    window.removeEventListener("unhandledrejection", onRejection);
  };
  window.__flashLivePage = cleanup;
  return cleanup;
})
