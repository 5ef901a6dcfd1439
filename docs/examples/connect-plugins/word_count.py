"""A connector pair written in Python for strom's Kafka Connect (docs/CONNECT.md).

WordsSource reads the words of a text file, one record per word, and remembers how far it
got (its source offset), so a restarted task goes on where the last one stopped.
WordCountSink keeps a running count per word and writes it to a JSON file on every flush.
Put this file in a directory named by the worker's plugin.path; the classes are then known
as `word_count.WordsSourceConnector` (or `WordsSource`) and `WordCountSink`.
"""
import asyncio
import json
import os

from clients.connect import (ConfigDef, Importance, SinkConnector, SinkTask, SourceConnector,
                             SourceRecord, SourceTask, Type)


class WordsSourceConnector(SourceConnector):
    def config(self):
        return (ConfigDef()
                .define("file", Type.STRING, importance=Importance.HIGH, documentation="Text to read.")
                .define("topic", Type.STRING, importance=Importance.HIGH, documentation="Where words go.")
                .define("words.per.poll", Type.INT, 100, Importance.LOW, "Records per poll()."))

    def start(self, props):
        self.props = self.config().parse(props)      # typed values; a bad one raises, naming the key

    def task_class(self):
        return WordsSourceTask

    def task_configs(self, max_tasks):
        return [{"file": self.props["file"], "topic": self.props["topic"],
                 "words.per.poll": str(self.props["words.per.poll"])}]

    def stop(self):
        pass


class WordsSourceTask(SourceTask):
    async def start(self, props):                   # async: runs on the worker's event loop
        self.file, self.topic = props["file"], props["topic"]
        self.batch = int(props["words.per.poll"])
        self.partition = {"file": self.file}
        stored = self.context.offset_storage_reader.offset(self.partition)
        self.position = stored["word"] if stored else 0     # resume after a restart
        with open(self.file) as f:
            self.words = f.read().split()

    async def poll(self):
        if self.position >= len(self.words):
            await asyncio.sleep(0.5)                 # nothing new: wait, as a real source would
            return None
        records = []
        for word in self.words[self.position:self.position + self.batch]:
            self.position += 1
            records.append(SourceRecord(self.topic, None, None, word, None, word,
                                        source_partition=self.partition,
                                        source_offset={"word": self.position}))
        return records

    async def stop(self):
        pass


class WordCountSink(SinkConnector):
    def config(self):
        return ConfigDef().define("counts.file", Type.STRING, importance=Importance.HIGH,
                                  documentation="JSON file of the counts.")

    def start(self, props):
        self.props = dict(props)

    def task_class(self):
        return WordCountSinkTask

    def task_configs(self, max_tasks):
        return [dict(self.props)]                   # one task: one file of counts

    def stop(self):
        pass


class WordCountSinkTask(SinkTask):
    def start(self, props):                          # plain methods run in the task's thread
        self.path = props["counts.file"]
        self.counts = {}
        if os.path.exists(self.path):
            with open(self.path) as f:
                self.counts = json.load(f)

    def put(self, records):
        for r in records:
            self.counts[r.value] = self.counts.get(r.value, 0) + 1

    def flush(self, current_offsets):                # before the worker commits the offsets
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.counts, f, sort_keys=True)
        os.replace(tmp, self.path)

    def stop(self):
        pass
