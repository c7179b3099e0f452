"""What the passes and the checks ask about a kernel: index arithmetic (symbolic: linear
forms, and the simplifier's rule table, the one rewrite kept here because every pass runs
it), axes and loop nests (axes), bounds proofs (bounds), which iterations may run at once
(parallel), which accumulations may contract (contract), and the static checks of rendered
GPU kernels (gpucheck, with localrace and localbanks, evaluating index expressions at
enumerated points). None of them changes a graph: the passes do (compiler/passes).
"""
