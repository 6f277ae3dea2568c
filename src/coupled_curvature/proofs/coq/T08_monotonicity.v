(* T8, monotonicity in the curvature scale, for every block size n: under H -> tH (t > 0),
   D -> tD and D⁺ -> D⁺/t (T8_D_scale, T8_Dplus_scale), so for D > 0 (resp. D⁺ > 0) D grows
   and D⁺ shrinks strictly with t (T8_D_mono, T8_Dplus_mono).  `pinv_scale`: (tH)⁺ = t⁻¹ H⁺
   for every t (MathComp's 0⁻¹ = 0 covers t = 0).  The Laplace / PAC-Bayes reading of SPEC T8
   (posterior variance, the KL terms) is interpretation, not a theorem, and is not formalised. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import ring.
From CoupledCurvature Require Import Defs Common T04_invariance_group T07_pseudo_inverse.

Section T8.
Variable R : rcfType.
Variable n : nat.
Implicit Types (w g : 'cV[R]_n) (H X : 'M[R]_n).

Lemma pinv_scale (t : R) H : pinv (t *: H) = t^-1 *: pinv H.
Proof.
have [->|t0] := eqVneq t 0.
  rewrite invr0 !scale0r; apply: pinv_eq.
  by split; rewrite ?mulmx0 ?mul0mx ?trmx0.
apply: pinv_eq; have [h1 h2 h3 h4] := pinv_penrose H; split.
- rewrite ?(sAl, sAr, scalerA) h1; congr (_ *: _); field; exact: t0.
- rewrite ?(sAl, sAr, scalerA) h2; congr (_ *: _); field; exact: t0.
- by rewrite ?(sAl, sAr, scalerA) linearZ /= h3.
- by rewrite ?(sAl, sAr, scalerA) linearZ /= h4.
Qed.

(* T8: H -> tH multiplies D by t *)
Theorem T8_D_scale (t : R) w g H : 0 < t -> coupledD w g (t *: H) = t * coupledD w g H.
Proof. by move=> _; rewrite /coupledD /RQ quad_scale !mulrA. Qed.

(* T8: H -> tH divides D⁺ by t *)
Theorem T8_Dplus_scale (t : R) w g H : 0 < t -> coupledDplus w g (t *: H) = coupledDplus w g H / t.
Proof.
move=> _; rewrite /coupledDplus pinv_scale quad_scale.
by set a := t^-1; set b := (sqnorm w)^-1; ring.
Qed.

(* the monotonicity facts: D strictly increasing, D⁺ strictly decreasing in t when positive *)
Theorem T8_D_mono (s t : R) w g H : 0 < coupledD w g H -> 0 < s -> s < t ->
  coupledD w g (s *: H) < coupledD w g (t *: H).
Proof. by move=> D0 s0 st; rewrite !T8_D_scale ?(Order.POrderTheory.lt_trans s0 st) // ltr_pmul2r. Qed.

Theorem T8_Dplus_mono (s t : R) w g H : 0 < coupledDplus w g H -> 0 < s -> s < t ->
  coupledDplus w g (t *: H) < coupledDplus w g (s *: H).
Proof.
move=> D0 s0 st; have t0 : 0 < t by apply: Order.POrderTheory.lt_trans st.
by rewrite !T8_Dplus_scale // ltr_pmul2l // ltf_pinv.
Qed.

End T8.

(* The instance: the block w = g = e_0, H = I (any n > 0) has D = D⁺ = 1 > 0, so T8_D_mono and
   T8_Dplus_mono apply with s = 1 < 2 = t: D grows strictly from 1 to 2 and D⁺ falls strictly from
   1 to 1/2 (the values by T8_D_scale and T8_Dplus_scale). *)
Section T8NonVacuity.
Variable R : rcfType.
Variable n : nat.

Lemma T8_nonvacuous :
  let w := e (0 : 'I_n.+1) in let H := (1%:M : 'M[R]_n.+1) in
  [/\ coupledD w w (1 *: H) < coupledD w w (2 *: H),
      coupledDplus w w (2 *: H) < coupledDplus w w (1 *: H),
      coupledD w w (1 *: H) = 1 /\ coupledD w w (2 *: H) = 2 &
      coupledDplus w w (1 *: H) = 1 /\ coupledDplus w w (2 *: H) = 2^-1].
Proof.
move=> w H.
have D1 : coupledD w w H = 1 by rewrite coupledD_e1.
have P1 : coupledDplus w w H = 1.
  by rewrite /coupledDplus pinv_unit ?unitmx1 // invmx1 quad1 !sqnorm_e divr1 mulr1.
have l12 : (1 : R) < 2 by rewrite ltr1n.
split.
- by apply: T8_D_mono; rewrite ?D1 ?ltr01.
- by apply: T8_Dplus_mono; rewrite ?P1 ?ltr01.
- by rewrite !T8_D_scale ?ltr01 ?ltr0n // D1 mul1r mulr1.
- by rewrite !T8_Dplus_scale ?ltr01 ?ltr0n // P1 divr1 div1r.
Qed.

End T8NonVacuity.
