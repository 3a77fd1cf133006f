"""A real pretrained model, run on the course's own maths.

* :mod:`attn_core.model.encoder`    -- a BERT-style encoder's forward pass (pure numpy,
  built on :func:`attn_core.multi_head_attention`)
* :mod:`attn_core.model.layers`     -- its building blocks: layer norm, GELU, mean
  pooling, L2 normalisation
* :mod:`attn_core.model.pretrained` -- reads all-MiniLM-L6-v2's weights and tokenizer
  into that encoder (needs ``safetensors`` and ``tokenizers``)
* :mod:`attn_core.model.head_roles` -- scores for recognisable head patterns (previous
  token, same word, ...)
* :mod:`attn_core.model.probes`     -- controlled comparisons: minimal pairs, the size of
  attention's update against the residual stream, position embeddings reversed or zeroed
* :mod:`attn_core.model.llm_file`   -- SmolLM2-135M-Instruct read from its GGUF file (needs
  ``gguf``): ``load_llm()`` -> ``(params, config)``, checks, names, tied unembedding
* :mod:`attn_core.model.llm`        -- ``LLMConfig`` and ``llm_forward`` / ``llm_losses``
  (nn's decoder with hooks: attention maps, masked keys, zeroed values, ablated heads, a
  sliding window with sinks)
* :mod:`attn_core.model.llm_tokenizer` -- its tokenizer (``tokenizers``) and ChatML prompt
* :mod:`attn_core.model.llm_generate`  -- ``chat`` and ``llm_generate`` through the KV cache
* :mod:`attn_core.model.llm_fast`      -- ``LLMDecoder``, the decoding path they run
  (preallocated KV buffers, checks at the boundary), and ``stack_matrices``

Import the modules by name (``from attn_core.model.pretrained import load_model``): this
package imports none of them, so the exercise checks can use ``head_roles`` without
loading the model's readers.
"""
