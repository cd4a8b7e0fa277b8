"""Real Core ML conversions on Linux: backbones and trained models become .mlpackage files."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainpilot.backends.ane.convert import ConvertedModel, convert_module, export_mlpackage
from trainpilot.backends.ane.backbone import split_model
from trainpilot.job.models import build_model

ct = pytest.importorskip("coremltools")

SHAPE = (1, 12, 12)


@pytest.fixture(scope="module")
def backbone_package(tmp_path_factory: pytest.TempPathFactory) -> ConvertedModel:
    model = build_model("small_cnn", SHAPE, 4)
    split = split_model(model, SHAPE, 2)
    return convert_module(split.backbone, SHAPE, tmp_path_factory.mktemp("ane") / "backbone.mlpackage",
                          batch_size=8, output_name="features")


@pytest.fixture(scope="module")
def exported_mlp(tmp_path_factory: pytest.TempPathFactory) -> ConvertedModel:
    return export_mlpackage(build_model("mlp", SHAPE, 3), SHAPE, tmp_path_factory.mktemp("ane") / "mlp.mlpackage")


def _spec(path: Path):  # type: ignore[no-untyped-def]
    return ct.utils.load_spec(str(path))


def test_backbone_is_a_real_ml_program_package(backbone_package: ConvertedModel) -> None:
    path = backbone_package.path
    assert path.is_dir() and path.suffix == ".mlpackage"
    manifest = json.loads((path / "Manifest.json").read_text())
    assert manifest["itemInfoEntries"], "an .mlpackage lists its model and weights in Manifest.json"
    spec = _spec(path)
    assert spec.WhichOneof("Type") == "mlProgram"
    (inp,), (out,) = spec.description.input, spec.description.output
    assert inp.name == "x" and list(inp.type.multiArrayType.shape) == [8, 1, 12, 12]  # fixed batch for the ANE
    assert out.name == "features"
    # float32 at the boundary (numpy in, numpy out); FP16 inside is what the ANE computes in
    assert inp.type.multiArrayType.dataType == ct.proto.FeatureTypes_pb2.ArrayFeatureType.FLOAT32
    assert backbone_package.output_shape == (32 * 3 * 3,)


def test_backbone_program_holds_the_frozen_layers(backbone_package: ConvertedModel) -> None:
    ops = backbone_package.op_counts
    assert ops.get("conv") == 2 and ops.get("relu") == 2 and ops.get("max_pool") == 2
    assert "linear" not in ops, "the trainable classifier must stay out of the backbone"
    assert "cast" in ops, "FP16 compute: inputs are cast from float32"


def test_exported_model_takes_one_sample_and_returns_logits(exported_mlp: ConvertedModel) -> None:
    spec = _spec(exported_mlp.path)
    (inp,), (out,) = spec.description.input, spec.description.output
    assert (inp.name, out.name) == ("input", "logits")
    assert list(inp.type.multiArrayType.shape) == [1, 1, 12, 12]
    assert exported_mlp.output_shape == (3,)
    assert exported_mlp.op_counts.get("linear") == 2


def test_conversion_is_quiet_and_import_is_timed(tmp_path: Path) -> None:
    """coremltools' import warnings, tqdm bars and prints must not reach stdout/stderr."""
    script = (
        "from trainpilot.backends.ane.coreml_import import import_seconds, notes\n"
        "from trainpilot.backends.ane.convert import export_mlpackage\n"
        "from trainpilot.job.models import build_model\n"
        f"export_mlpackage(build_model('mlp', (4,), 2), (4,), r'{tmp_path / 'm.mlpackage'}')\n"
        "import sys; sys.__stderr__.write(f'IMPORT {import_seconds():.3f} NOTES {len(notes())}')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("IMPORT "), done.stderr
    seconds = float(done.stderr.split()[1])
    assert 0 < seconds < 60
    assert int(done.stderr.split()[3]) > 0, "the captured noise is kept for debugging"
