"""A TrainJob's model-initializer step: what Kubeflow's model initializer does for an
``hf://`` or ``s3://`` URI (fetch the model into the shared volume), done offline: the
operator passed the TrainJob's ``initializer.model.storageUri`` as STORAGE_URI; this step
writes a small torch model and the URI it was asked for to /workspace/model, which the
trainer's pods then read. It runs before the trainer (the JobSet's dependsOn: Complete)."""

import os
from pathlib import Path

import torch

uri = os.environ["STORAGE_URI"]
target = Path("/workspace/model")
target.mkdir(parents=True, exist_ok=True)
model = torch.nn.Linear(1, 1)
with torch.no_grad():
    model.weight.fill_(3.0)
    model.bias.fill_(2.0)
torch.save(model.state_dict(), target / "model.pt")
(target / "SOURCE").write_text(uri)
print(f"MODEL_INITIALIZED uri={uri} path={target}", flush=True)
