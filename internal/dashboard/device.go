package dashboard

import (
	"net/http"
	"net/url"
	"strings"

	"withruntime.dev/runtime/internal/api"
)

type deviceData struct {
	Code      string
	Request   *api.DeviceRequest
	FormName  string
	FormLimit string
	FormTrial bool
	Done      string
}

// devicePage shows a device login waiting for approval (?code=, as the
// CLI's link fills it in) with the approval form, or a form to type a code.
// Looking a code up is for administrators only (the API's rule).
func (d *Dashboard) devicePage(w http.ResponseWriter, r *http.Request, s *signed) {
	data := deviceData{Code: strings.TrimSpace(r.FormValue("code")), FormLimit: "5.00"}
	v := s.view("Approve a device", "device")
	v.Data = &data
	if data.Code == "" {
		d.render(w, http.StatusOK, "device", v)
		return
	}
	var req api.DeviceRequest
	if err := d.call(r.Context(), s.key, "GET", "/v1/device/requests/"+url.PathEscape(data.Code), nil, &req); err != nil {
		v.Error = err.Error()
		d.render(w, statusOf(err), "device", v)
		return
	}
	data.Request = &req
	data.FormName = defaultKeyName(req.ClientName)
	data.FormTrial = req.TrialRequested && req.TrialHours > 0
	d.render(w, http.StatusOK, "device", v)
}

// defaultKeyName suggests a key name from what the CLI said it is.
func defaultKeyName(client string) string {
	if client == "" {
		return "device"
	}
	return "login " + client
}

// deviceDecide approves (with the form's name, daily limit and trial) or
// denies a device login.
func (d *Dashboard) deviceDecide(w http.ResponseWriter, r *http.Request, s *signed) {
	data := deviceData{Code: strings.TrimSpace(r.PostFormValue("code")), FormName: r.PostFormValue("name"),
		FormLimit: r.PostFormValue("limit"), FormTrial: r.PostFormValue("trial") != ""}
	v := s.view("Approve a device", "device")
	v.Data = &data
	fail := func(status int, msg string) {
		v.Error = msg
		var req api.DeviceRequest
		if d.call(r.Context(), s.key, "GET", "/v1/device/requests/"+url.PathEscape(data.Code), nil, &req) == nil {
			data.Request = &req
		}
		d.render(w, status, "device", v)
	}
	if r.PostFormValue("decision") == "deny" {
		if err := d.call(r.Context(), s.key, "POST", "/v1/device/deny", api.DeviceDenyRequest{UserCode: data.Code}, nil); err != nil {
			fail(statusOf(err), err.Error())
			return
		}
		data.Done = "Refused " + data.Code + ": the CLI is told so at its next poll."
		d.render(w, http.StatusOK, "device", v)
		return
	}
	limit, err := parseUSD("daily limit", data.FormLimit)
	if err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	if err := d.call(r.Context(), s.key, "POST", "/v1/device/approve", api.DeviceApproveRequest{UserCode: data.Code,
		KeyName: data.FormName, DailyLimitMicros: limit, Trial: data.FormTrial}, nil); err != nil {
		fail(statusOf(err), err.Error())
		return
	}
	d.cfg.Log.Info("dashboard: device login approved", "by", s.key.ID, "keyName", data.FormName)
	data.Done = "Approved " + data.Code + ": the CLI gets its key at its next poll (within seconds)."
	d.render(w, http.StatusOK, "device", v)
}
