"""What a generation holds in GPU memory: weights per component, exact for every dtype and quantizer
(``weights``, ``quantized``), activation peaks (``activations``), the resident bytes and peak under diffusers'
offload modes and whether that fits a GPU (``estimate``), their renderings (``report``) and the memory section
of the HTML page (``html``).

Not named ``memory``: ``flopcalc.memory`` is the public function, and a subpackage of that name would replace
it on the package once imported."""
