"""What a training step costs: the backward pass derived module by module from the forward tree
(``backward``), LoRA adapters (``lora``), FLOPs per sample and step and MFU (``estimate``), their renderings
(``report``) and the training section of the HTML page (``html``)."""
