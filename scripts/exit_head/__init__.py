"""The EESD exit-head trainer's parts (scripts/train_exit_head.py): safetensors I/O, the training
data, the exit layer and the self-distillation loss."""
