"""Whole-project analysis: the other files of a project that a checked file's imports name
are found on disk, read and followed (shapecheck/project.py, shapecheck/analysis/imported.py,
shapecheck/analysis/configs.py), and a cached result rests on all of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from shapecheck.analysis import analyse
from shapecheck.analysis.facts import Fact, TensorFact
from shapecheck.analysis.imported import import_line_names
from shapecheck.linter import lint_source
from shapecheck.project import locate
from shapecheck.rule import Rule, all_rules
from shapecheck.source import Source, parse_source
from tests.conftest import run_python

RULES = [rule() for rule in all_rules()]

SPLIT_HEADS = """\
    import torch as th


    def split_heads(x, heads):
        b, l, e = x.shape
        return th.transpose(x.view(b, l, heads, e // heads), 1, 2)


    def split_heads_contiguous(x, heads):
        return split_heads(x, heads).contiguous()
    """

HEADS_LAST = SPLIT_HEADS.replace(
    "th.transpose(x.view(b, l, heads, e // heads), 1, 2)", "x.view(b, l, heads, e // heads)"
)
"""The helper edited to leave the heads where they are: viewing its result back is right."""

MERGES = """\
    import torch
    from .layers import split_heads

    th = None  # not torch here: the helper's own imports must be the ones read


    def merge(x):
        b, l, e = x.shape
        return split_heads(x, 4).view(b, l, e)
    """


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def findings(path: Path, rules: list[Rule] | None = None) -> set[tuple[int, str]]:
    result = lint_source(path.read_bytes(), str(path), RULES if rules is None else rules)
    return {(diagnostic.line, diagnostic.code) for diagnostic in result.diagnostics}


def package(root: Path, **files: str) -> Path:
    """A package ``pkg`` under ``root`` with these modules; the folder holding them."""
    write(root, {"pkg/__init__.py": "", **{f"pkg/{name}.py": text for name, text in files.items()}})
    return root / "pkg"


# --- following what other files define ---------------------------------------------------------


def test_a_helper_of_another_file_is_followed_with_that_files_imports(tmp_path: Path) -> None:
    folder = package(tmp_path, layers=SPLIT_HEADS, model=MERGES)
    result = lint_source((folder / "model.py").read_bytes(), str(folder / "model.py"), RULES)
    [finding] = result.diagnostics
    assert (finding.line, finding.code) == (9, "SC101")
    assert "`split_heads(x, 4)` left non-adjacent" in finding.message  # the call, not its body


def test_the_same_code_alone_knows_nothing_of_the_helper(tmp_path: Path) -> None:
    write(tmp_path, {"model.py": MERGES})  # no layers.py beside it
    assert findings(tmp_path / "model.py") == set()


def test_a_class_of_another_file_runs_its_forward_from_its_own_init(tmp_path: Path) -> None:
    layers = """\
        import torch.nn as nn


        class Project(nn.Module):
            def __init__(self, width, heads):
                super().__init__()
                self.heads = heads
                self.proj = nn.Linear(width, width)

            def forward(self, x):
                b, l, e = x.shape
                return self.proj(x).view(b, l, self.heads, e // self.heads).transpose(1, 2)
        """
    model = """\
        import torch.nn as nn
        from pkg.layers import Project


        class Model(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.project = Project(width, 4)

            def forward(self, x):
                b, l, e = x.shape
                return self.project(x).view(b, l, e)
        """
    folder = package(tmp_path, layers=layers, model=model)
    assert findings(folder / "model.py") == {(12, "SC101")}


def test_constructor_arguments_give_the_class_its_sizes(tmp_path: Path) -> None:
    attention = """\
        import torch.nn as nn


        class Head(nn.Module):
            def __init__(self, n_embd, head_size):
                super().__init__()
                self.value = nn.Linear(n_embd, head_size)

            def forward(self, x):
                return self.value(x)
        """
    model = """\
        import torch.nn as nn
        from .attention import Head


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = Head(64, head_size=HEAD_SIZE)
                self.proj = nn.Linear(64, 64)

            def forward(self, x):
                b, t, c = x.shape
                return self.proj(self.head(x))
        """
    folder = package(tmp_path, attention=attention, model=model.replace("HEAD_SIZE", "64 // 4"))
    assert findings(folder / "model.py") == {(13, "SC501")}
    write(folder, {"model.py": model.replace("HEAD_SIZE", "64")})
    assert findings(folder / "model.py") == set()


def test_a_layer_handed_to_init_is_the_instances_layer(tmp_path: Path) -> None:
    """Mistral's ``MoeLayer(experts, gate=nn.Linear(args.dim, num_experts), ...)`` keeps the
    gate it is handed (``self.gate = gate``): its ``forward`` returns the gate's width where
    it is built so, and nothing where no construction says what the gate is."""
    moe = """\
        import torch.nn as nn


        class Router(nn.Module):
            def __init__(self, gate, k):
                super().__init__()
                self.gate = gate
                self.k = k

            def forward(self, inputs):
                return self.gate(inputs).softmax(dim=-1)
        """
    model = """\
        import torch.nn as nn
        from .moe import Router


        class Block(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.router = Router(GATE, k=2)
                self.experts = nn.Linear(dim, 8)

            def forward(self, x):
                b, n, d = x.shape
                routed = self.router(x)
        """
    built = package(tmp_path / "built", moe=moe, model=model.replace("GATE", "nn.Linear(dim, 8)"))
    unknown = package(tmp_path / "unknown", moe=moe, model=model.replace("GATE", "self.experts"))

    def routed(folder: Path) -> Fact | None:
        [forward] = [
            f for f in _analysed(folder / "model.py").functions if f.name.endswith("forward")
        ]
        return next(fact for _, name, fact in forward.bindings if name == "routed")

    known = routed(built)
    assert isinstance(known, TensorFact) and known.shape is not None
    assert [str(dim) for dim in known.shape] == ["b", "n", "8"]
    assert not isinstance(routed(unknown), TensorFact) or routed(unknown).shape is None


def test_a_helper_of_another_file_shows_the_rank_of_what_it_is_handed(tmp_path: Path) -> None:
    layers = """\
        def repeat_kv(hidden_states, bias):
            batch, heads, length, head_dim = hidden_states.shape
            return hidden_states + bias
        """
    model = """\
        import torch
        from .layers import repeat_kv


        def f(key):
            first = key.relu()
            return repeat_kv(key, torch.zeros(1))
        """
    folder = package(tmp_path, layers=layers, model=model)
    source = parse_source((folder / "model.py").read_bytes(), str(folder / "model.py"))
    assert isinstance(source, Source)
    analysis = analyse(source.module, source.text, path=str(folder / "model.py"))
    [f] = [function for function in analysis.functions if function.name == "f"]
    [first] = [fact for node, name, fact in f.bindings if name == "first"]
    assert isinstance(first, TensorFact) and first.rank == 4  # the helper unpacks four sizes


def test_findings_stay_in_the_file_where_the_bug_is_written(tmp_path: Path) -> None:
    layers = """\
        import torch


        def merge_heads(x):
            b, h, l, d = x.shape
            return x.transpose(1, 2).view(b, l, h * d)
        """
    model = """\
        import torch
        from .layers import merge_heads


        def attend(q, k, v):
            out = torch.softmax(q @ k.transpose(-2, -1) / 8.0, dim=-1) @ v
            return merge_heads(out)
        """
    folder = package(tmp_path, layers=layers, model=model)
    assert findings(folder / "layers.py") == {(6, "SC101")}
    assert findings(folder / "model.py") == set()


@pytest.mark.parametrize(
    ("helper", "found"),
    [
        ("scores if mask is None else scores + mask", {(8, "SC201")}),  # the caller's scores back
        ("scores.float() @ scores.new_ones(4, 4)", set()),  # a product of its own: not ours
    ],
)
def test_what_a_tensor_held_comes_back_from_another_file_as_it_went(
    tmp_path: Path, helper: str, found: set[tuple[int, str]]
) -> None:
    """timm's ``maybe_add_mask(attn, mask)`` in layers/attention.py: the scores it hands back
    are the caller's, whose keys are transposed on the wrong axes."""
    layers = """\
        def maybe_add_mask(scores, mask=None):
            return HELPER
        """
    model = """\
        import torch
        from .layers import maybe_add_mask


        def attend(x, mask, B: int, N: int, H: int, D: int):
            q = x.view(B, N, H, D).transpose(1, 2)
            k = x.view(B, N, H, D).transpose(1, 2)
            attn = q @ k.transpose(1, 2) * D**-0.5
            attn = maybe_add_mask(attn, mask)
            return attn.softmax(dim=-1)
        """
    folder = package(tmp_path, layers=layers.replace("HELPER", helper), model=model)
    assert findings(folder / "model.py") == found


# --- configurations -------------------------------------------------------------------------------

CONFIG = """\
    class Config:
        def __init__(self, hidden_size=12, num_attention_heads=3):
            CHECK
            self.hidden_size = hidden_size
            self.num_attention_heads = num_attention_heads
    """

ATTENTION = """\
    import torch.nn as nn
    from .configuration import Config


    class Attention(nn.Module):
        def __init__(self, config: Config):
            super().__init__()
            self.num_heads = config.num_attention_heads
            self.head_dim = config.hidden_size // config.num_attention_heads
            self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)

        def forward(self, x):
            b, l, e = x.shape
            q, k, v = self.qkv(x).view(b, l, 3, self.num_heads, self.head_dim).unbind(2)
            return q
    """

RAISES = "if hidden_size % num_attention_heads != 0: raise ValueError('heads must divide')"


@pytest.mark.parametrize(
    ("check", "expected"),
    [
        (RAISES, set()),
        ("assert hidden_size % num_attention_heads == 0", set()),
        ("pass", {(9, "SC502")}),  # it checks nothing
        ("if hidden_size % 2 != 0: raise ValueError('odd')", {(9, "SC502")}),  # another check
    ],
)
def test_a_configuration_that_checks_the_division_is_the_constructors_check(
    tmp_path: Path, check: str, expected: set[tuple[int, str]]
) -> None:
    folder = package(tmp_path, configuration=CONFIG.replace("CHECK", check), modeling=ATTENTION)
    assert findings(folder / "modeling.py") == expected


@pytest.mark.parametrize(("check", "expected"), [(RAISES, set()), ("pass", {(13, "SC502")})])
def test_a_configuration_of_the_same_module_is_read_too(
    tmp_path: Path, check: str, expected: set[tuple[int, str]]
) -> None:
    """A modular file defines its configuration beside the model (Zaya's ``ZayaConfig``)."""
    model = ATTENTION.replace(
        "    from .configuration import Config\n", CONFIG.replace("CHECK", check)
    )
    folder = package(tmp_path, modeling=model)
    assert findings(folder / "modeling.py") == expected


@pytest.mark.parametrize(
    ("text_check", "expected"),
    [(RAISES, set()), ("pass", {(9, "SC502")})],  # the text configuration checks nothing
)
def test_a_configuration_of_either_class_is_checked_where_each_class_checks(
    tmp_path: Path, text_check: str, expected: set[tuple[int, str]]
) -> None:
    """CLIP's attention takes ``config: VisionConfig | TextConfig``: the division is checked
    where each of them checks it."""
    configuration = textwrap.dedent(CONFIG).replace("CHECK", RAISES) + textwrap.dedent(
        CONFIG
    ).replace("Config", "TextConfig")
    modeling = ATTENTION.replace("import Config", "import Config, TextConfig").replace(
        "config: Config", "config: Config | TextConfig"
    )
    folder = package(
        tmp_path, configuration=configuration.replace("CHECK", text_check), modeling=modeling
    )
    assert findings(folder / "modeling.py") == expected


def test_a_configuration_read_through_its_dictionaries_and_the_constructors_callers(
    tmp_path: Path,
) -> None:
    """FastSpeech2-Conformer's shape: the heads come from a dict the configuration builds
    (``config.encoder_config["num_attention_heads"]``), handed down two constructors."""
    configuration = """\
        class Config:
            def __init__(self, hidden_size=12, encoder_heads=3, decoder_heads=2):
                self.hidden_size = hidden_size
                self.encoder_heads = encoder_heads
                self.decoder_heads = decoder_heads
                self.encoder_config = {"num_attention_heads": self.encoder_heads}
                self.decoder_config = {"num_attention_heads": self.decoder_heads}

            def validate(self):
                if self.hidden_size % self.encoder_heads != 0:
                    raise ValueError("encoder heads must divide the width")
                DECODER_CHECK
        """
    modeling = """\
        import torch.nn as nn
        from .configuration import Config


        class Attention(nn.Module):
            def __init__(self, config: Config, module_config):
                super().__init__()
                self.num_heads = module_config["num_attention_heads"]
                self.hidden_size = config.hidden_size
                self.head_dim = self.hidden_size // self.num_heads
                self.q = nn.Linear(self.hidden_size, self.hidden_size)

            def forward(self, x):
                b, l, e = x.shape
                return self.q(x).view(b, l, self.num_heads, self.head_dim)


        class Layer(nn.Module):
            def __init__(self, config: Config, module_config):
                super().__init__()
                self.attention = Attention(config, module_config)


        class Model(nn.Module):
            def __init__(self, config: Config):
                super().__init__()
                self.encoder = Layer(config, config.encoder_config)
                self.decoder = Layer(config, config.decoder_config)
        """
    decoder_check = (
        "if self.hidden_size % self.decoder_heads != 0:\n"
        "                    raise ValueError('decoder heads must divide the width')"
    )
    folder = package(
        tmp_path,
        configuration=configuration.replace("DECODER_CHECK", decoder_check),
        modeling=modeling,
    )
    assert findings(folder / "modeling.py") == set()
    write(folder, {"configuration.py": configuration.replace("DECODER_CHECK", "pass")})
    assert findings(folder / "modeling.py") == {(10, "SC502")}  # the decoder's is unchecked


# --- where modules are found ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "checked"),
    [
        # absolute, from the package's import root
        ({"pkg/__init__.py": "", "pkg/layers.py": SPLIT_HEADS}, "pkg/model.py"),
        # a src/ layout, imported from tests/ beside it
        (
            {"pyproject.toml": "", "src/pkg/__init__.py": "", "src/pkg/layers.py": SPLIT_HEADS},
            "tests/test_model.py",
        ),
        # re-exported by the package's __init__ (and by a star import in it)
        (
            {"pkg/__init__.py": "from .inner import *\n", "pkg/inner.py": SPLIT_HEADS},
            "pkg/model.py",
        ),
        # a script beside the module it imports: its folder is its import root
        ({"layers.py": SPLIT_HEADS}, "model.py"),
    ],
)
def test_absolute_imports_are_found_from_where_the_file_lies(
    tmp_path: Path, files: dict[str, str], checked: str
) -> None:
    module = next(name for name in files if name.endswith(("layers.py", "inner.py")))
    written = module.removesuffix(".py").replace("src/", "").replace("/", ".")
    importer = (
        "from pkg import split_heads" if "inner" in module else f"from {written} import split_heads"
    )
    merges = MERGES.replace("from .layers import split_heads", importer)
    write(tmp_path, {**files, checked: merges})
    assert findings(tmp_path / checked) == {(9, "SC101")}


def test_module_aliases_and_relative_modules(tmp_path: Path) -> None:
    aliased = MERGES.replace("from .layers import split_heads", "import pkg.layers as layers")
    aliased = aliased.replace("split_heads(x, 4)", "layers.split_heads(x, 4)")
    relative = MERGES.replace("from .layers import split_heads", "from . import layers")
    relative = relative.replace("split_heads(x, 4)", "layers.split_heads(x, 4)")
    folder = package(tmp_path, layers=SPLIT_HEADS, aliased=aliased, relative=relative)
    assert findings(folder / "aliased.py") == {(9, "SC101")}
    assert findings(folder / "relative.py") == {(9, "SC101")}


def test_installed_packages_are_never_read(tmp_path: Path) -> None:
    """A module found only inside ``site-packages`` (a file checked there, or a project root
    that holds a virtual environment) stays unknown: results never depend on what is
    installed."""
    installed = tmp_path / "venv" / "lib" / "site-packages"
    folder = package(installed, layers=SPLIT_HEADS, model=MERGES)
    assert findings(folder / "model.py") == set()
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    write(tmp_path, {"app.py": MERGES.replace("from .layers", "from pkg.layers")})
    assert findings(tmp_path / "app.py") == set()


def test_torch_and_the_standard_library_are_never_looked_for(tmp_path: Path) -> None:
    folder = package(tmp_path, layers=SPLIT_HEADS, model=MERGES)
    (folder / "torch.py").write_text("def transpose(x, a, b):\n    return x\n", encoding="utf-8")
    (folder / "math.py").write_text("", encoding="utf-8")
    analysis = _analysed(folder / "model.py")
    assert analysis.project is not None
    looked = analysis.project.evidence
    assert str(folder / "layers.py") in looked
    assert not any(Path(path).stem in ("torch", "math") for path in looked)
    assert findings(folder / "model.py") == {(9, "SC101")}  # layers.py's `th` is torch's


@pytest.mark.parametrize(
    "broken",
    ["def split_heads(x, heads:\n", b"\xff\xfe not utf-8", "directory", "fifo"],
)
def test_a_dependency_that_cannot_be_read_is_unknown(tmp_path: Path, broken: str | bytes) -> None:
    folder = package(tmp_path, model=MERGES)
    layers = folder / "layers.py"
    if broken == "directory":
        layers.mkdir()
    elif broken == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no FIFOs here")
        os.mkfifo(layers)
    elif isinstance(broken, bytes):
        layers.write_bytes(broken)
    else:
        layers.write_text(broken, encoding="utf-8")
    assert findings(folder / "model.py") == set()


def test_import_cycles_end_and_imports_further_than_two_files_away_are_not_read(
    tmp_path: Path,
) -> None:
    """model -> a -> b -> c: the helper in c is two imports from a, three from model."""
    relay = """\
        from .NEXT import split_heads as inner
        from .model import merge


        def split_heads(x, heads):
            return inner(x, heads)
        """
    folder = package(
        tmp_path,
        model=MERGES.replace(".layers", ".a"),
        a=relay.replace("NEXT", "b"),
        b=relay.replace("NEXT", "c"),
        c=SPLIT_HEADS,
    )
    assert findings(folder / "model.py") == set()  # c is too far to be read
    assert findings(folder / "a.py") == set()
    write(folder, {"model.py": MERGES.replace(".layers", ".b")})
    assert findings(folder / "model.py") == {(9, "SC101")}  # b -> c: within reach


def test_where_a_file_lies(tmp_path: Path) -> None:
    write(
        tmp_path, {"pyproject.toml": "", "src/pkg/__init__.py": "", "src/pkg/sub/__init__.py": ""}
    )
    location = locate(str(tmp_path / "src" / "pkg" / "sub" / "model.py"))
    assert location.name == "pkg.sub.model"
    assert location.roots == (str(tmp_path / "src"), str(tmp_path))
    script = locate(str(tmp_path / "tools" / "script.py"))
    assert (script.name, script.roots[0]) == ("script", str(tmp_path / "tools"))


# --- what a result rests on ---------------------------------------------------------------------


def test_a_result_rests_on_every_file_read_and_every_place_looked_at(tmp_path: Path) -> None:
    absolute = MERGES.replace("from .layers", "from pkg.layers")
    folder = package(tmp_path, layers=SPLIT_HEADS, model=absolute)
    result = lint_source((folder / "model.py").read_bytes(), str(folder / "model.py"), RULES)
    looked = result.dependencies
    assert looked[str(folder / "layers.py")] is not None  # its content's digest
    assert looked[str(folder / "__init__.py")] is not None  # where the package starts
    assert looked[str(tmp_path / "__init__.py")] is None  # and where it does not
    assert looked[str(tmp_path / "pyproject.toml")] is None  # no project root there
    relative = lint_source(MERGES.encode(), str(folder / "model.py"), RULES).dependencies
    assert str(folder / "__init__.py") not in relative  # dots count folders, not packages


def test_what_a_dependency_rested_on_is_replayed_for_every_file_that_uses_it(
    tmp_path: Path,
) -> None:
    """The second file uses what the first one's check already analysed (once per process):
    its evidence must still name the file that analysis read."""
    relay = """\
        from .layers import split_heads as inner


        def split_heads(x, heads):
            return inner(x, heads)
        """
    folder = package(
        tmp_path,
        layers=SPLIT_HEADS,
        relay=relay,
        first=MERGES.replace(".layers", ".relay"),
        second=MERGES.replace(".layers", ".relay"),
    )
    for name in ("first", "second"):
        path = folder / f"{name}.py"
        result = lint_source(path.read_bytes(), str(path), RULES)
        assert {(d.line, d.code) for d in result.diagnostics} == {(9, "SC101")}
        assert str(folder / "layers.py") in result.dependencies, name


def _shapecheck(*args: str, cwd: Path) -> list[tuple[str, int, str]]:
    process = run_python("-m", "shapecheck", "--format", "json", *args, cwd=cwd)
    assert process.returncode in (0, 1), process.stderr
    return [(Path(d["path"]).name, d["line"], d["code"]) for d in json.loads(process.stdout)]


def test_a_module_read_as_a_dependency_is_checked_on_the_same_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """layers.py, parsed for model.py's check, is not parsed again for its own, and its
    findings are those of a check of it alone; edited since, it is parsed again."""
    from shapecheck import linter

    heads_first = SPLIT_HEADS.replace(
        "th.transpose(x.view(b, l, heads, e // heads), 1, 2)", "x.view(b, heads, l, e // heads)"
    )
    folder = package(tmp_path, layers=heads_first, model=MERGES)
    layers = folder / "layers.py"
    alone = findings(layers)
    assert alone == {(6, "SC102")}
    findings(folder / "model.py")
    parsed: list[str] = []
    monkeypatch.setattr(
        linter, "parse_source", lambda data, path: parsed.append(path) or parse_source(data, path)
    )
    assert findings(layers) == alone
    assert parsed == []
    edited = layers.read_bytes() + b"\n"
    result = lint_source(edited, str(layers), RULES)
    assert parsed == [str(layers)]
    assert {(each.line, each.code) for each in result.diagnostics} == alone


def test_editing_a_dependency_checks_its_users_again(tmp_path: Path) -> None:
    """The cache keys a result by its file's content; one that rests on layers.py is a hit
    only while layers.py is as it was."""
    folder = package(tmp_path, layers=SPLIT_HEADS, model=MERGES)
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    assert _shapecheck("pkg/model.py", cwd=tmp_path) == [("model.py", 9, "SC101")]
    write(folder, {"layers.py": HEADS_LAST})
    assert _shapecheck("pkg/model.py", cwd=tmp_path) == []
    write(folder, {"layers.py": SPLIT_HEADS})
    assert _shapecheck("pkg/model.py", cwd=tmp_path) == [("model.py", 9, "SC101")]
    (folder / "layers.py").unlink()  # gone: the module is no longer found
    assert _shapecheck("pkg/model.py", cwd=tmp_path) == []
    assert list((tmp_path / ".shapecheck_cache").rglob("*.json"))


def test_a_dependency_checked_in_the_same_run_is_hashed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A warm run trusts attention.py's result by the digest of layers.py taken when layers.py
    was looked up itself (after attention.py: the names sort so), not by reading it again; and
    layers.py edited, that digest is the new one: attention.py is checked again."""
    from shapecheck import cache as cache_module
    from shapecheck.cache import ResultCache
    from shapecheck.run import check_files

    folder = package(tmp_path, layers=SPLIT_HEADS, attention=MERGES)
    targets: list[tuple[str, bytes | None]] = [
        (str(folder / name), None) for name in ("attention.py", "layers.py")
    ]
    codes = [rule.code for rule in RULES]
    cache = ResultCache(tmp_path / "cache", codes)
    [cold, _] = check_files(targets, codes, cache, jobs=1)
    assert [(d.line, d.code) for d in cold.diagnostics] == [(9, "SC101")]

    digested: list[str] = []
    real_digest = cache_module.digest
    monkeypatch.setattr(
        cache_module, "digest", lambda path: digested.append(path) or real_digest(path)
    )
    rules_run: list[str] = []
    monkeypatch.setattr(
        "shapecheck.run._check_all", lambda pending, *_: rules_run.extend(pending) or []
    )
    warm_cache = ResultCache(tmp_path / "cache", codes)
    [warm, _] = check_files(targets, codes, warm_cache, jobs=1)
    assert warm.diagnostics == cold.diagnostics and not rules_run
    assert str(folder / "layers.py") not in digested
    check_files(targets[:1], codes, ResultCache(tmp_path / "cache", codes), jobs=1)
    assert digested == [str(folder / "layers.py")]  # not checked in this run: read for the check

    monkeypatch.undo()
    write(folder, {"layers.py": HEADS_LAST})
    [edited, _] = check_files(targets, codes, ResultCache(tmp_path / "cache", codes), jobs=1)
    assert edited.diagnostics == []


def test_text_given_for_a_file_is_not_taken_for_the_file_a_result_rests_on(
    tmp_path: Path,
) -> None:
    """An editor's unsaved text of layers.py (given on stdin) is not what model.py's cached
    result rested on: layers.py as it is on disk decides, even where the text is the very
    content the result was worked out from."""
    from shapecheck.cache import ResultCache
    from shapecheck.run import check_files

    folder = package(tmp_path, layers=SPLIT_HEADS, model=MERGES)
    model, layers = str(folder / "model.py"), str(folder / "layers.py")
    codes = [rule.code for rule in RULES]
    cache = ResultCache(tmp_path / "cache", codes)
    [cold] = check_files([(model, None)], codes, cache, jobs=1)
    assert [(d.line, d.code) for d in cold.diagnostics] == [(9, "SC101")]
    unsaved = (folder / "layers.py").read_bytes()
    write(folder, {"layers.py": HEADS_LAST})
    targets: list[tuple[str, bytes | None]] = [(layers, unsaved), (model, None)]
    _, checked = check_files(targets, codes, ResultCache(tmp_path / "cache", codes), jobs=1)
    assert checked.diagnostics == []  # on disk, layers.py leaves the heads where they are


STATIC_ATTENTION = """\
    import math

    import torch.nn as nn
    import torch.nn.functional as F


    class Attention(nn.Module):
        @staticmethod
        def attention(q, k, v):
            p = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
            return (p @ v).transpose(1, 2), p
    """

STATIC_USER = """\
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self, d_model, num_heads):
            super().__init__()
            self.h = num_heads
            self.qkv = nn.Linear(d_model, 3 * d_model)
            self.attend = Attention()

        def forward(self, x):
            b, n, c = x.shape
            q, k, v = (t.view(b, n, self.h, -1).transpose(1, 2) for t in self.qkv(x).chunk(3, -1))
            out, _ = Attention.attention(q, k, v)
            out2, _ = self.attend.attention(q, k, v)
            return out.view(b, n, c), out2.view(b, n, c)
    """


def test_a_static_method_and_an_injected_layers_method_are_followed(tmp_path: Path) -> None:
    """``Attention.attention(q, k, v)`` and ``self.attend.attention(q, k, v)``: both hand
    back a transposed view, in this file or from another."""
    user = textwrap.dedent(STATIC_USER)
    here = textwrap.dedent(STATIC_ATTENTION) + user.replace("import torch.nn as nn\n", "")
    there = "from .attention import Attention\n" + user
    folder = package(tmp_path, attention=STATIC_ATTENTION, model=there, alone=here)
    for name in ("alone.py", "model.py"):
        result = lint_source((folder / name).read_bytes(), str(folder / name), RULES)
        found = sorted((d.code, d.column) for d in result.diagnostics)
        assert found == [("SC101", 20), ("SC101", 40)], name  # out.view, out2.view


def test_a_lookup_on_another_files_registry_is_still_the_eager_attention(tmp_path: Path) -> None:
    """``ALL_ATTENTION_FUNCTIONS.get_interface("eager", eager)`` with the registry imported
    from another file is no static method of it: the eager function is still what is called."""
    fixture = (Path(__file__).parents[1] / "fixtures" / "SC303_hf_eager_attention.py").read_text()
    moved = fixture.replace(
        "ALL_ATTENTION_FUNCTIONS = AttentionInterface()",
        "from .registry import ALL_ATTENTION_FUNCTIONS",
    )
    assert moved != fixture
    registry = "class Registry:\n    pass\n\n\nALL_ATTENTION_FUNCTIONS = Registry()\n"
    folder = package(tmp_path, registry=registry)
    (folder / "model.py").write_text(moved, encoding="utf-8")
    assert findings(folder / "model.py") == {(33, "SC303"), (38, "SC201")}


def test_a_helper_of_another_file_mapped_over_the_projections_is_followed(
    tmp_path: Path,
) -> None:
    layers = """\
        def split_heads(t):
            b, n, d = t.shape
            return t.view(b, n, 4, d // 4).transpose(1, 2)
        """
    model = """\
        import torch.nn as nn
        from .layers import split_heads


        class Attention(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.to_qkv = nn.Linear(dim, dim * 3)

            def forward(self, x):
                b, n, d = x.shape
                q, k, v = map(split_heads, self.to_qkv(x).chunk(3, dim=-1))
                attn = (q @ k.transpose(-1, -2) * (d // 4) ** -0.5).softmax(dim=-1)
                return (attn @ v).reshape(b, n, d)
        """
    folder = package(tmp_path, layers=layers, model=model)
    assert findings(folder / "model.py") == {(14, "SC103")}  # the heads merged untransposed
    write(
        folder,
        {"model.py": model.replace("(attn @ v).reshape", "(attn @ v).transpose(1, 2).reshape")},
    )
    assert findings(folder / "model.py") == set()


def test_a_class_derived_from_another_files_class_inherits_its_layers_and_methods(
    tmp_path: Path,
) -> None:
    base = """\
        import torch.nn as nn


        class Attention(nn.Module):
            def __init__(self, dim, heads):
                super().__init__()
                self.heads = heads
                self.qkv = nn.Linear(dim, dim * 3)
                self.proj = nn.Linear(dim, dim)

            def split(self, t):
                b, n, d = t.shape
                return t.view(b, n, self.heads, d // self.heads).transpose(1, 2)
        """
    derived = """\
        import torch
        from .base import Attention


        class Unscaled(Attention):
            def forward(self, x):
                b, n, d = x.shape
                q, k, v = map(self.split, self.qkv(x).chunk(3, dim=-1))
                attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
                return self.proj((attn @ v).reshape(b, n, d))
        """
    folder = package(tmp_path, base=base, derived=derived)
    # the inherited split hands back [b, heads, n, d]: unscaled scores, heads merged untransposed
    assert findings(folder / "derived.py") == {(9, "SC301"), (10, "SC103")}


def test_an_inherited_method_calling_a_layer_the_derived_class_replaced_is_no_crash(
    tmp_path: Path,
) -> None:
    """Transformers' modular files: the base's forward (read in its file) calls ``self.mlp``,
    which the derived ``__init__`` built from a class of its own file."""
    base = """\
        import torch.nn as nn


        class Layer(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.mlp = nn.Linear(dim, dim)

            def forward(self, x):
                return self.mlp(x).view(x.shape[0], -1)
        """
    derived = """\
        import torch
        import torch.nn as nn
        from .base import Layer


        class Gated(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.gate = nn.Linear(dim, dim)

            def forward(self, x):
                return self.gate(x).transpose(1, 2)


        class GatedLayer(Layer):
            def __init__(self, dim):
                super().__init__(dim)
                self.mlp = Gated(dim)

            def run(self, x):
                b, n, d = x.shape
                return self.forward(x)
        """
    folder = package(tmp_path, base=base, derived=derived)
    result = lint_source((folder / "derived.py").read_bytes(), str(folder / "derived.py"), RULES)
    assert [d.code for d in result.diagnostics if d.code == "SC000"] == []


@pytest.mark.parametrize(
    "call",
    [
        "return self.scores(q, q)",
        "self.scores(q, q)  # its value dropped\n                return q",
    ],
)
def test_a_layer_learns_its_parameters_from_the_modules_of_its_folder_that_call_it(
    tmp_path: Path, call: str
) -> None:
    """hyunwoongko/transformer before ee92100: the scores are scaled by the model width, which
    only the caller in the other file shows (q and k are [B, H, L, D] as it splits them)."""
    scores = """\
        import math
        import torch.nn as nn


        class ScaledScores(nn.Module):
            def forward(self, q, k):
                batch_size, head, length, d_tensor = k.size()
                d_model = head * d_tensor
                score = q @ k.transpose(2, 3) / math.sqrt(SCALE)
                return score.softmax(dim=-1)
        """
    heads = """\
        import torch.nn as nn
        from .scores import ScaledScores


        class Heads(nn.Module):
            def __init__(self, d_model, n_head):
                super().__init__()
                self.n_head = n_head
                self.w_q = nn.Linear(d_model, d_model)
                self.scores = ScaledScores()

            def forward(self, x):
                b, n, d = x.shape
                q = self.w_q(x).view(b, n, self.n_head, d // self.n_head).transpose(1, 2)
                CALL
        """.replace("CALL", call)
    folder = package(tmp_path, scores=scores.replace("SCALE", "d_model"), heads=heads)
    [finding] = lint_source(
        (folder / "scores.py").read_bytes(), str(folder / "scores.py"), RULES
    ).diagnostics
    assert (finding.line, finding.code) == (9, "SC302")
    assert finding.message.endswith("(given what line 15 of heads.py passes)")
    write(folder, {"scores.py": scores.replace("SCALE", "d_tensor")})
    assert findings(folder / "scores.py") == set()
    (folder / "heads.py").unlink()  # nobody calls it: nothing tells q's shape
    write(folder, {"scores.py": scores.replace("SCALE", "d_model")})
    assert findings(folder / "scores.py") == set()


LECTURE_HEAD = """\
    import torch.nn as nn
    import torch.nn.functional as F


    class Head(nn.Module):
        def __init__(self, n_embd, head_size):
            super().__init__()
            self.key = nn.Linear(n_embd, head_size, bias=False)
            self.query = nn.Linear(n_embd, head_size, bias=False)

        def forward(self, x):
            B, T, C = x.shape
            k, q = self.key(x), self.query(x)
            return F.softmax(q @ k.transpose(-2, -1) * C**-0.5, dim=-1)
    """

BUILDS_HEADS = """\
    import torch.nn as nn
    from .attention import Head


    class Heads(nn.Module):
        def __init__(self, n_embd, num_heads):
            super().__init__()
            self.heads = nn.ModuleList([Head(n_embd, HEAD_SIZE) for _ in range(num_heads)])
    """


def test_a_class_is_checked_in_the_sizes_another_module_of_its_folder_builds_it_with(
    tmp_path: Path,
) -> None:
    folder = package(
        tmp_path,
        attention=LECTURE_HEAD,
        model=BUILDS_HEADS.replace("HEAD_SIZE", "n_embd // num_heads"),
    )
    result = lint_source(
        (folder / "attention.py").read_bytes(), str(folder / "attention.py"), RULES
    )
    [finding] = result.diagnostics
    assert (finding.line, finding.code) == (14, "SC302")  # in Head, where the scale is written
    assert finding.message.endswith(
        "(where line 8 of model.py builds `Head(n_embd, n_embd // num_heads)` with "
        "head_size = n_embd//num_heads)"
    )
    assert result.dependencies[str(folder / "model.py")] is not None
    assert str(folder) + os.sep in result.dependencies  # which modules the folder holds
    assert findings(folder / "model.py") == set()  # never reported in the caller's file
    write(folder, {"model.py": BUILDS_HEADS.replace("HEAD_SIZE", "n_embd")})  # one head: d_k == C
    assert findings(folder / "attention.py") == set()


@pytest.mark.parametrize(
    ("neighbour", "imports"),
    [
        ("from .attention import Head", True),
        ("    from pkg.attention import Head  # built lazily", True),
        ("from . import layers, attention", True),
        ("from pkg import attention as attn", True),
        ("import pkg.attention as attn", True),
        ("# generated from attention.py: do not edit\nfrom .layers import Head", False),
        ("from .attention_utils import Head", False),
        ("from . import attentions", False),
        ('doc = "from .attention import Head"', False),
        ("x = attention(y)\nimport os", False),
    ],
)
def test_a_neighbour_is_read_for_callers_only_where_an_import_line_names_the_module(
    neighbour: str, imports: bool
) -> None:
    assert import_line_names(neighbour.encode(), b"attention") is imports


def test_a_module_added_to_the_folder_checks_its_neighbours_again(tmp_path: Path) -> None:
    folder = package(tmp_path, attention=LECTURE_HEAD)
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    assert _shapecheck("pkg/attention.py", cwd=tmp_path) == []
    write(folder, {"model.py": BUILDS_HEADS.replace("HEAD_SIZE", "n_embd // num_heads")})
    assert _shapecheck("pkg/attention.py", cwd=tmp_path) == [("attention.py", 14, "SC302")]
    (folder / "model.py").unlink()
    assert _shapecheck("pkg/attention.py", cwd=tmp_path) == []


def test_a_folder_of_many_modules_is_not_searched_for_constructions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shapecheck.project

    folder = package(
        tmp_path,
        attention=LECTURE_HEAD,
        model=BUILDS_HEADS.replace("HEAD_SIZE", "n_embd // num_heads"),
    )
    monkeypatch.setattr(shapecheck.project, "MAX_NEIGHBOURS", 2)  # __init__, attention, model
    assert findings(folder / "attention.py") == set()


def test_the_same_content_elsewhere_is_checked_against_its_own_dependencies(
    tmp_path: Path,
) -> None:
    package(tmp_path / "one", layers=SPLIT_HEADS, model=MERGES)
    package(tmp_path / "two", layers=HEADS_LAST, model=MERGES)
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    assert _shapecheck("one/pkg/model.py", cwd=tmp_path) == [("model.py", 9, "SC101")]
    assert _shapecheck("two/pkg/model.py", cwd=tmp_path) == []
    assert _shapecheck("one/pkg/model.py", cwd=tmp_path) == [("model.py", 9, "SC101")]


def test_version_reads_no_project(tmp_path: Path) -> None:
    process = run_python("-X", "importtime", "-m", "shapecheck", "--version")
    assert process.returncode == 0, process.stderr
    assert "shapecheck.project" not in process.stderr
    assert "shapecheck.cache" not in process.stderr


def _analysed(path: Path):  # type: ignore[no-untyped-def]
    source = parse_source(path.read_bytes(), str(path))
    assert isinstance(source, Source)
    return analyse(source.module, source.text, path=str(path))


def test_a_layer_of_another_file_keeps_the_leading_sizes_of_what_it_is_given(
    tmp_path: Path,
) -> None:
    """GPT-2's ``Conv1D`` (``transformers/pytorch_utils.py``): ``x.view(x.size()[:-1] +
    (nf,))`` comes back as ``[*hidden_states.shape[:-1], nf]`` in the caller's names."""
    conv = """\
        import torch
        import torch.nn as nn


        class Conv1D(nn.Module):
            def __init__(self, nf, nx):
                super().__init__()
                self.nf = nf

            def forward(self, x):
                size_out = x.size()[:-1] + (self.nf,)
                x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
                return x.view(size_out)
        """
    model = """\
        import torch.nn as nn
        from .pytorch_utils import Conv1D


        class Attention(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.c_attn = Conv1D(3 * config.hidden_size, config.hidden_size)

            def forward(self, hidden_states, x):
                qkv = self.c_attn(hidden_states)
        """
    folder = package(tmp_path, pytorch_utils=conv, model=model)
    [forward] = [f for f in _analysed(folder / "model.py").functions if f.name.endswith("forward")]
    [qkv] = [fact for _, name, fact in forward.bindings if name == "qkv"]
    assert isinstance(qkv, TensorFact) and qkv.prefixed is not None
    assert (qkv.prefixed.prefix.owner, qkv.prefixed.prefix.dropped) == ("hidden_states", 1)
    assert len(qkv.prefixed.tail) == 1


def test_coverage_counts_what_came_from_other_files(tmp_path: Path) -> None:
    from shapecheck.coverage import measure

    model = """\
        import torch
        from .layers import split_heads


        def attend(x):
            batch, length, width = x.shape
            q = split_heads(x, 4)
            k = split_heads(x, 4)
            return torch.softmax(q @ k.transpose(-2, -1), dim=-1)
        """
    folder = package(tmp_path, layers=SPLIT_HEADS, model=model)
    path = folder / "model.py"
    measured, _ = measure((str(path), path.read_bytes()))
    (folder / "layers.py").unlink()
    alone, _ = measure((str(path), path.read_bytes()))
    assert measured is not None and alone is not None
    assert (measured.from_other_files, alone.from_other_files) == (2, 0)
    assert measured.rank_known > alone.rank_known


def test_coverage_counts_the_classes_checked_in_their_callers_sizes(tmp_path: Path) -> None:
    from shapecheck.coverage import measure, render_text

    folder = package(
        tmp_path,
        attention=LECTURE_HEAD,
        model=BUILDS_HEADS.replace("HEAD_SIZE", "n_embd // num_heads"),
    )
    path = folder / "attention.py"
    measured, _ = measure((str(path), path.read_bytes()))
    assert measured is not None
    assert (measured.built_in_callers_sizes, measured.built_in_other_files) == (1, 1)
    assert "1 class checked again in the sizes their constructions give them (1 built in" in (
        " ".join(render_text([measured], measured, top=0).split())
    )
    (folder / "model.py").unlink()
    alone, _ = measure((str(path), path.read_bytes()))
    assert alone is not None and alone.built_in_callers_sizes == 0


# --- what the user sees of shapes: --show-shapes and the editor --------------------------------

HEADS_OF = """\
    import torch
    from .layers import split_heads


    def heads_of(x):
        b, l, e = x.shape
        heads = split_heads(x, 4)
        return heads
    """


def test_show_shapes_sees_the_projects_other_files(tmp_path: Path) -> None:
    from shapecheck.show import show_shapes

    folder = package(tmp_path, layers=SPLIT_HEADS, heads=HEADS_OF)
    path = folder / "heads.py"
    source = parse_source(path.read_bytes(), str(path))
    assert isinstance(source, Source)
    [(_, _, notes)] = show_shapes(source, "heads_of").functions
    assert [note.description.text for note in notes if note.line == 7] == ["heads: [b, 4, l, e//4]"]
    # the same text read from standard input without a name lies nowhere: nothing is known
    nowhere = Source("-", source.text, source.module, source.encoding)
    [(_, _, alone)] = show_shapes(nowhere, "heads_of").functions
    assert [note.description.text for note in alone if note.line == 7] == []


# --- known-modules: installed packages the user names -------------------------------------------


def _installed_and_app(tmp_path: Path, known: str) -> tuple[Path, dict[str, str]]:
    """``mylib`` installed in a ``site-packages`` on the Python path, a project whose
    ``app.py`` uses its helper (its root marked by a ``setup.py``; the configuration, in the
    folder above, is none of the files a result rests on), and the environment that runs
    shapecheck there."""
    site = tmp_path / "venv" / "lib" / "site-packages"
    write(site, {"mylib/__init__.py": "", "mylib/layers.py": SPLIT_HEADS})
    app = MERGES.replace("from .layers", "from mylib.layers")
    write(tmp_path / "project", {"app.py": app, "setup.py": ""})
    _configure(tmp_path, known)
    python_path = os.pathsep.join([os.environ.get("PYTHONPATH", ""), str(site)])
    return site, {**os.environ, "PYTHONPATH": python_path}


def _configure(tmp_path: Path, known: str) -> None:
    configuration = "[tool.shapecheck]\n" + (f"known-modules = {known}\n" if known else "")
    (tmp_path / "pyproject.toml").write_text(configuration, encoding="utf-8")


def _run_app(
    tmp_path: Path, environment: dict[str, str], *options: str
) -> subprocess.CompletedProcess[str]:
    """``shapecheck OPTIONS app.py`` in the project, with the installed package on the path."""
    return subprocess.run(
        [sys.executable, "-m", "shapecheck", *options, "app.py"],
        cwd=tmp_path / "project",
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )


def _check_app(tmp_path: Path, environment: dict[str, str], *options: str) -> set[tuple[int, str]]:
    process = _run_app(tmp_path, environment, "--format", "json", *options)
    assert process.returncode in (0, 1), process.stderr
    return {(d["line"], d["code"]) for d in json.loads(process.stdout)}


def test_an_installed_package_is_read_only_when_known_modules_names_it(tmp_path: Path) -> None:
    site, environment = _installed_and_app(tmp_path, known="")
    assert _check_app(tmp_path, environment, "--no-cache") == set()
    assert _check_app(tmp_path, environment) == set()  # cached: without the setting
    _configure(tmp_path, '["mylib"]')
    assert _check_app(tmp_path, environment) == {(9, "SC101")}  # the setting is in the key
    assert _check_app(tmp_path, environment, "--no-cache") == {(9, "SC101")}
    write(site, {"mylib/layers.py": HEADS_LAST})  # a new version installed
    assert _check_app(tmp_path, environment) == set()
    # a package above the one named, or beside it, stays unread
    for other in ('["mylib.sub"]', '["mylibrary"]'):
        _configure(tmp_path, other)
        write(site, {"mylib/layers.py": SPLIT_HEADS})
        assert _check_app(tmp_path, environment) == set()


def test_a_known_package_is_read_with_its_own_relative_imports(tmp_path: Path) -> None:
    site, environment = _installed_and_app(tmp_path, known='["mylib.api"]')
    write(site, {"mylib/api/__init__.py": "from .layers import split_heads\n"})
    write(site, {"mylib/api/layers.py": SPLIT_HEADS})
    app = MERGES.replace("from .layers", "from mylib.api")
    write(tmp_path / "project", {"app.py": app})
    assert _check_app(tmp_path, environment, "--no-cache") == {(9, "SC101")}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('"mylib"', None),
        ("[1]", "known-modules must be a list of strings, not an array holding an integer"),
        ('["my-lib"]', "known-modules: 'my-lib' is not a module name"),
        ('[".layers"]', "known-modules: '.layers' is not a module name"),
        ('["torch.nn"]', "known-modules: 'torch.nn' is never read: the analysis knows it"),
        ('["os"]', "known-modules: 'os' is never read"),
    ],
)
def test_known_modules_that_cannot_be_read_are_a_clear_error(
    tmp_path: Path, value: str, message: str | None
) -> None:
    _, environment = _installed_and_app(tmp_path, known=value)
    process = _run_app(tmp_path, environment)
    if message is None:
        assert process.returncode == 1, process.stderr  # a string alone names one module
    else:
        assert process.returncode == 2
        assert message in process.stderr
