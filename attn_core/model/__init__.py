"""A real pretrained model, run on the course's own maths.

* :mod:`attn_core.model.encoder`    -- a BERT-style encoder's forward pass (pure numpy,
  built on :func:`attn_core.multi_head_attention`)
* :mod:`attn_core.model.pretrained` -- reads all-MiniLM-L6-v2's weights and tokenizer
  into that encoder (needs ``safetensors`` and ``tokenizers``)
* :mod:`attn_core.model.head_roles` -- scores for recognisable head patterns (previous
  token, same word, ...)
* :mod:`attn_core.model.probes`     -- controlled comparisons: minimal pairs, the size of
  attention's update against the residual stream, position embeddings reversed or zeroed

Import the modules by name (``from attn_core.model.pretrained import load_model``): this
package imports none of them, so the exercise checks can use ``head_roles`` without
loading the model's readers.
"""
