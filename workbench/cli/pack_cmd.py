"""`ptxwb pack list|show TARGET|stats`: the knowledge packs, their files, tokens and ids."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from workbench.cli.output import console, print_json
from workbench.evaluate.request import Language
from workbench.knowledge import TOKENIZER, FileStats, list_packs, load_pack, pack_stats

app = typer.Typer(
    help="Knowledge packs: the architecture text and helper headers given to the model.", no_args_is_help=True
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
VariantOpt = Annotated[
    str | None,
    typer.Option("--pack-variant", "--variant", "-v", help="Add one pattern file (see `ptxwb pack list`)."),
]


@app.command("list")
def list_cmd(as_json: JsonOpt = False) -> None:
    """List the packs: target, files, variants, tokens and the id sessions record."""
    rows: list[dict[str, Any]] = []
    for manifest in list_packs():
        stats = pack_stats(load_pack(manifest.name))
        rows.append(
            {
                "name": manifest.name,
                "title": manifest.title,
                "sm": stats.sm,
                "files": len(stats.files),
                "tokens": stats.total_tokens,
                "id": stats.id,
                "variants": sorted(manifest.variants),
            }
        )
    if as_json:
        print_json(rows)
        return
    table = Table(title=f"{len(rows)} knowledge packs (tokens: {TOKENIZER})", title_justify="left")
    for column in ("pack", "target", "files", "tokens"):
        table.add_column(column)
    table.add_column("id", no_wrap=True)
    for row in rows:
        table.add_row(row["name"], row["sm"], str(row["files"]), str(row["tokens"]), row["id"])
    out = console()
    out.print(table)
    for row in rows:
        # The option's name as `ptxwb run` and `pack show` both take it.
        out.print(f"{row['name']} variants (--pack-variant): {', '.join(row['variants']) or 'none'}")


@app.command("show")
def show(
    target: Annotated[str, typer.Argument(help="Target name: hopper or blackwell.")],
    variant: VariantOpt = None,
    text: Annotated[bool, typer.Option("--text", help="Print the assembled prompt text.")] = False,
    as_json: JsonOpt = False,
    language: Annotated[
        Language, typer.Option("--language", help="cuda, or triton for the pack's Triton section.")
    ] = "cuda",
) -> None:
    """One pack: its files in prompt order with tokens, id and sha256 (or the prompt text itself)."""
    pack = load_pack(target, variant, language)
    if text:
        print(pack.prompt_text(), end="")
        return
    stats = pack_stats(pack)
    if as_json:
        print_json(stats.model_dump())
        return
    out = console()
    out.print(f"[bold]{pack.title}[/bold] ({pack.sm})  id {stats.id}")
    out.print(f"sha256 {stats.sha256}")
    out.print(f"variants: {', '.join(pack.variants) or 'none'}")
    _print_files(stats.files, stats.total_tokens)


@app.command("stats")
def stats(as_json: JsonOpt = False) -> None:
    """Tokens per file and in total for every pack, against the 20k-32k budget."""
    all_stats = [pack_stats(load_pack(m.name)) for m in list_packs()]
    if as_json:
        print_json([s.model_dump() for s in all_stats])
        return
    out = console()
    for s in all_stats:
        verdict = "within" if s.within_budget else "OUTSIDE"
        out.print(
            f"[bold]{s.name}[/bold] ({s.sm})  {s.total_tokens} tokens ({TOKENIZER}), {verdict} "
            f"{s.budget[0]}-{s.budget[1]}"
        )
        out.print(f"id {s.id}")
        out.print(f"sha256 {s.sha256}")
        _print_files(s.files, s.total_tokens)


def _print_files(files: list[FileStats], total: int) -> None:
    table = Table(title_justify="left")
    table.add_column("file", overflow="fold")
    for column in ("kind", "tokens", "bytes"):
        table.add_column(column)
    for f in files:
        table.add_row(f.path, f.kind, str(f.tokens), str(f.bytes))
    table.add_row("[bold]total (assembled prompt)[/bold]", "", f"[bold]{total}[/bold]", "")
    console().print(table)
