package relay

import (
	"reflect"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/admin"
)

// TestStatusCopiesEveryField fills every field of the engine's status
// and checks that the public SlotStatus carries each one, with its value,
// and has no field of its own.
func TestStatusCopiesEveryField(t *testing.T) {
	var in admin.SlotStatus
	fill(reflect.ValueOf(&in).Elem())
	out := reflect.ValueOf(slotStatus(&in)).Elem()
	iv := reflect.ValueOf(in)
	if iv.NumField() != out.NumField() {
		t.Fatalf("admin.SlotStatus has %d fields, relay.SlotStatus %d", iv.NumField(), out.NumField())
	}
	for i := range iv.NumField() {
		name := iv.Type().Field(i).Name
		got := out.FieldByName(name)
		if !got.IsValid() {
			t.Errorf("relay.SlotStatus has no field %s", name)
			continue
		}
		want := iv.Field(i).Convert(got.Type())
		if !reflect.DeepEqual(got.Interface(), want.Interface()) {
			t.Errorf("%s: got %v, want %v", name, got.Interface(), want.Interface())
		}
	}
}

// fill sets every field of v, recursively, to a value that is not zero.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(1700000000, 0)))
			return
		}
		for i := range v.NumField() {
			fill(v.Field(i))
		}
	default:
		panic("fill: no value for " + v.Type().String())
	}
}
