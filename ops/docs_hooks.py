"""MkDocs hook (mkdocs.yml `hooks:`): adds the pages generated from the code when the site is built.

`reference/cli.md` comes from walking hitkit's click group and `reference/study-file.md` from the
pydantic models of the study file, so neither can drift from what this version accepts.
"""

from __future__ import annotations

from mkdocs.structure.files import File


def on_files(files, config):
    from hitkit.cli.reference import cli_reference_markdown
    from hitkit.cli.study_reference import study_reference_markdown

    for uri, text in (
        ("reference/cli.md", cli_reference_markdown()),
        ("reference/study-file.md", study_reference_markdown()),
    ):
        existing = files.get_file_from_path(uri)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, uri, content=text))
    return files
