"""The EC2 backend on spot capacity: `run_instances` asks for a one-time spot instance (with the maximum price when
one is set), and a listing reads AWS's interruption warning from the spot requests of the live spot instances
(one `describe_spot_instance_requests`, none when there is no live spot instance), listing a warned instance with
its reclaim time. Real boto3 clients, their answers given by botocore's Stubber (AWS's codes, which the fake cloud
gives only one of)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any

import pytest

pytest.importorskip("botocore", reason="boto3 comes with the aws extra (make test installs it)")
from botocore.stub import ANY, Stubber

from scaler.config.sections import EC2WorkerManagerConfig, WorkerConfig
from scaler.worker_manager.aws.client import AwsClients
from scaler.worker_manager.backend import LaunchSpec, UnitInfo, UnitState
from scaler.worker_manager.orb_aws_ec2.backend import SPOT_NOTICE_SECONDS, Ec2Backend

NOTICE = datetime(2026, 5, 4, 12, 0, 0, tzinfo=timezone.utc)


def backend(clients: AwsClients, **settings: Any) -> Ec2Backend:
    config = EC2WorkerManagerConfig(
        scheduler_address="tcp://127.0.0.1:2345", worker_manager_id="ec2", aws_region="us-east-1",
        image_id="ami-12345678", environment="image", s3_bucket="bucket", **settings,
    )  # fmt: skip
    return Ec2Backend(config, "ec2", clients)


def no_reports(s3: Stubber, count: int) -> None:
    """The units' boot reports are read from the bucket: none written yet."""
    for _ in range(count):
        s3.add_client_error("get_object", "NoSuchKey", http_status_code=404)


def launched_with(clients: AwsClients, **settings: Any) -> dict[str, Any]:
    """The arguments `run_instances` got for one unit."""
    sent: dict[str, Any] = {}
    ec2 = clients["ec2"]
    ec2.meta.events.register("provide-client-params.ec2.RunInstances", lambda params, **_: sent.update(params))
    with Stubber(ec2) as stubber, Stubber(clients["s3"]) as s3:
        s3.add_response("head_bucket", {})
        s3.add_response("put_object", {})  # the unit's manifest
        stubber.add_response("run_instances", {"Instances": [{"InstanceId": "i-1"}]})
        spec = LaunchSpec("ec2", WorkerConfig(scheduler_address="tcp://127.0.0.1:2345", worker_type="EC2"))
        assert len(asyncio.run(backend(clients, **settings).launch(1, spec))) == 1
        stubber.assert_no_pending_responses()
    return sent


def instance(instance_id: str, unit_id: str, state: str, spot: bool) -> dict[str, Any]:
    described: dict[str, Any] = {
        "InstanceId": instance_id,
        "State": {"Name": state},
        "Tags": [{"Key": "scaler-manager-id", "Value": "ec2"}, {"Key": "scaler-unit-id", "Value": unit_id}],
        "LaunchTime": NOTICE,
    }
    if spot:
        described.update(InstanceLifecycle="spot", SpotInstanceRequestId=f"sir-{unit_id}")
    return described


def spot_request(instance_id: str, code: str) -> dict[str, Any]:
    return {"SpotInstanceRequestId": f"sir-{instance_id}", "InstanceId": instance_id, "State": "active",
            "Status": {"Code": code, "UpdateTime": NOTICE}}  # fmt: skip


def listed(
    clients: AwsClients, instances: list[dict[str, Any]], asked: list[str] | None, requests: tuple[Any, ...] = ()
) -> dict[str, UnitInfo]:
    """The units listed from these instances; `asked`: the instance ids whose spot requests the backend must ask
    for (None: it must not call describe_spot_instance_requests at all)."""
    with Stubber(clients["ec2"]) as stubber, Stubber(clients["s3"]) as s3:
        no_reports(s3, len(instances))  # every unit's, a gone one's too (read once: a failed boot's last words)
        stubber.add_response("describe_instances", {"Reservations": [{"Instances": instances}]}, {"Filters": ANY})
        if asked is not None:
            filters = [{"Name": "instance-id", "Values": asked}]
            stubber.add_response("describe_spot_instance_requests", {"SpotInstanceRequests": list(requests)},
                                 {"Filters": filters})  # fmt: skip
        units = asyncio.run(backend(clients, market_type="spot").list_units())
        stubber.assert_no_pending_responses()
    return {unit.unit_id: unit for unit in units}


def test_spot_instances_are_asked_for_one_time_terminating_at_the_maximum_price_given(clients: AwsClients) -> None:
    sent = launched_with(clients, market_type="spot", spot_max_price=0.05)
    assert sent["InstanceMarketOptions"] == {
        "MarketType": "spot",
        "SpotOptions": {
            "SpotInstanceType": "one-time",
            "InstanceInterruptionBehavior": "terminate",
            "MaxPrice": "0.05",
        },
    }
    without_price = launched_with(clients, market_type="spot")["InstanceMarketOptions"]["SpotOptions"]
    assert "MaxPrice" not in without_price, "AWS's default: at most the on-demand price"
    assert "InstanceMarketOptions" not in launched_with(clients), "on-demand unless asked"


@pytest.mark.parametrize("code", ["instance-terminated-no-capacity", "marked-for-termination"])
def test_a_warned_spot_instance_is_listed_with_its_reclaim_time(clients: AwsClients, code: str) -> None:
    units = listed(
        clients,
        [
            instance("i-spot", "u1", "running", True),
            instance("i-calm", "u2", "running", True),
            instance("i-od", "u3", "running", False),
        ],
        asked=["i-spot", "i-calm"],
        requests=(spot_request("i-spot", code), spot_request("i-calm", "fulfilled")),
    )
    assert units["u1"].reclaim_at == NOTICE.timestamp() + SPOT_NOTICE_SECONDS
    assert units["u1"].state is UnitState.RUNNING
    assert units["u2"].reclaim_at is None and units["u3"].reclaim_at is None


def test_no_spot_request_is_asked_for_without_a_live_spot_instance(clients: AwsClients) -> None:
    units = listed(clients, [instance("i-od", "u1", "running", False), instance("i-old", "u2", "terminated", True)],
                   asked=None)  # fmt: skip
    assert all(unit.reclaim_at is None for unit in units.values())
    assert units["u2"].state is UnitState.GONE


def test_a_terminated_spot_instance_is_gone_not_reclaimed(clients: AwsClients) -> None:
    gone = instance("i-gone", "u1", "terminated", True)
    gone.update(StateTransitionReason="Service initiated (2026-05-04 12:02:00 GMT)",
                StateReason={"Code": "Server.SpotInstanceTermination",
                             "Message": "Server.SpotInstanceTermination: Spot instance termination"})  # fmt: skip
    units = listed(
        clients, [gone, instance("i-live", "u2", "shutting-down", True)], asked=["i-live"],
        requests=(spot_request("i-live", "instance-terminated-no-capacity"),),
    )  # fmt: skip
    assert units["u1"].reclaim_at is None and units["u1"].state is UnitState.GONE
    assert "Server.SpotInstanceTermination" in units["u1"].detail
    assert units["u2"].reclaim_at is not None, "still on its way out: its workers are drained, not counted"
