package dwork_test

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	// Both codecs' generated files register in one binary, as they will in
	// the server's: no name or file path clashes (a clash panics at init).
	_ "switchyard/codec/controller"
	_ "switchyard/codec/dwork"
)

func TestRegistry(t *testing.T) {
	for _, name := range []protoreflect.FullName{
		"dwork.QueryMsg", "dwork.TaskMsg", "dwork.TaskMsg.Dep", "dwork.TaskMsg.LogMsg",
		"switchyard.controller.WorkerPulse", "switchyard.controller.ControlMsg",
	} {
		if _, err := protoregistry.GlobalTypes.FindMessageByName(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, name := range []protoreflect.FullName{"dwork.QueryMsg.Type", "dwork.TaskMsg.State"} {
		if _, err := protoregistry.GlobalTypes.FindEnumByName(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, path := range []string{"dwork.proto", "controller.proto"} {
		if _, err := protoregistry.GlobalFiles.FindFileByPath(path); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
}
