#!/usr/bin/env python3
"""Reads a TensorBoard event file with Google's protobuf library (Debian's python3-protobuf) and
prints its events as JSON lines: an independent check of Nimbus's event writer.

The Event and Summary messages are declared here with the field numbers of TensorFlow's
tensorflow/core/util/event.proto and tensorflow/core/framework/summary.proto (the parts used for
scalars), and parsed by protobuf itself. The TFRecord framing is read with its CRCs ignored (the
C++ test checks them).

Usage: read_tfevents.py FILE
"""
import json
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def event_class():
    f = descriptor_pb2.FileDescriptorProto(name="event_subset.proto", package="tensorflow", syntax="proto3")
    value = f.message_type.add(name="Value")
    value.field.add(name="tag", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_FLOAT,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    summary = f.message_type.add(name="Summary")
    summary.field.add(name="value", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                      type_name=".tensorflow.Value", label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED)
    event = f.message_type.add(name="Event")
    event.field.add(name="wall_time", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    event.field.add(name="summary", number=5, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                    type_name=".tensorflow.Summary", label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("tensorflow.Event"))


def main():
    Event = event_class()
    data = open(sys.argv[1], "rb").read()
    offset = 0
    while offset < len(data):
        (length,) = struct.unpack_from("<Q", data, offset)
        record = data[offset + 12: offset + 12 + length]
        offset += 12 + length + 4
        event = Event()
        event.ParseFromString(record)
        print(json.dumps({"wall_time": event.wall_time, "step": event.step, "file_version": event.file_version,
                          "values": [[v.tag, v.simple_value] for v in event.summary.value]}))


if __name__ == "__main__":
    main()
