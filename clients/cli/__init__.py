"""strom's command-line tools, with the names and flags of Kafka's bin/ tools.

Each module is runnable (`python -m clients.cli.topics ...`) and has a `main(argv=None) -> int`
used by the bin/kafka-*.sh wrappers and the console scripts:

    topics            kafka-topics             create / list / describe / alter / delete topics
    console_producer  kafka-console-producer   stdin lines -> records
    console_consumer  kafka-console-consumer   records -> stdout lines
    consumer_groups   kafka-consumer-groups    list / describe / delete groups, reset offsets
    get_offsets       kafka-get-offsets        earliest / latest / by-time offsets
    configs           kafka-configs            describe / alter topic and broker configs, users' SCRAM credentials
    acls              kafka-acls               add / list / remove ACLs
    transactions      kafka-transactions       list / describe transactions, find and abort hanging ones

Shared plumbing (bootstrap, properties files, timeouts, one-line errors) is in `common`.
"""
