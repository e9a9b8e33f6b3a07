"""Scripts that run on this CPU machine: browser frame rate, server memory, viewers' wait, the gallery, counted
against modelled bytes from a results file, the FA1-order kernel compiled for sm_90 without a GPU."""
