"""The ``transformer-core`` command line: one subcommand per pipeline stage.

Subcommands live in ``transformer_core.commands.<name>``; ``COMMANDS = (
    "download",
    "prepare",
    "spm",
    "binarize",
    "train",
    "average",
    "score",
    "flops",
    "params",
COMMANDS = (
    "translate",
    "ppl",
    "treebank",
    "evalb",
    "table2",
    "table3_row",
    "table3",
    "report",
)
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="transformer-core",
        description="Reproduce 'Attention Is All You Need': data, training, decoding, scoring, tables.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"transformer_core.commands.{name}")
        cmd = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except UserError as err:
        print(f"transformer-core {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"transformer-core {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
