from decoevo.cli.entry import main

main()
