package compat

import (
	"reflect"
	"slices"
	"testing"
)

// TestHotSettingNamesFollowTheStruct: settingDiff walks hotSettingNames, so it must name every
// member of hotSettings, in order.
func TestHotSettingNamesFollowTheStruct(t *testing.T) {
	var tags []string
	st := reflect.TypeFor[hotSettings]()
	for i := range st.NumField() {
		tags = append(tags, st.Field(i).Tag.Get("json"))
	}
	if !slices.Equal(tags, hotSettingNames) {
		t.Fatalf("hotSettingNames %v, struct tags %v", hotSettingNames, tags)
	}
}
