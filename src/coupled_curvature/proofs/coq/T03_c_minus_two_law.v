(* T3, the algebraic part of the c⁻² law, for every block size n.  T2's layer map acts on a
   parameter tensor block as w -> α w with α = c (W_l, b_l) or α = c^{-k} (W_{l+1}), c > 0; by T1 the
   block then maps as A = α I.  For every α <> 0 (T3_scalar_block):
     ‖g‖² and RQ scale by α⁻², wᵀHw and wᵀg are unchanged, D and D⁺ are unchanged;
   T3_layer_l and T3_layer_next specialise to α = c (factor c⁻²) and α = c^{-k} (factor c^{2k}).
   That T2's map is a symmetry of the network (any depth and width) is proved separately (T2);
   T03_network_law connects the two: the end-to-end theorems for the network's own loss. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import ring.
From CoupledCurvature Require Import Defs Common T01_transformation_law T04_invariance_group T07_pseudo_inverse.

Section T3.
Variable R : rcfType.
Variable n : nat.
Implicit Types (w g : 'cV[R]_n) (H : 'M[R]_n).

Lemma scalar_conformal (a : R) : a != 0 -> conformal (a%:M : 'M[R]_n).
Proof.
move=> a0; exists `|a|; split; first by rewrite normr_gt0.
by rewrite tr_scalar_mx -scalar_mxM real_normK ?num_real // expr2.
Qed.

Lemma act_w_scalar (a : R) w : act_w a%:M w = a *: w.
Proof. by rewrite /act_w mul_scalar_mx. Qed.

Lemma act_g_scalar (a : R) g : act_g a%:M g = a^-1 *: g.
Proof. by rewrite /act_g invmx_scalar tr_scalar_mx mul_scalar_mx. Qed.

Lemma act_H_scalar (a : R) H : act_H a%:M H = a ^- 2 *: H.
Proof.
rewrite /act_H invmx_scalar tr_scalar_mx mul_scalar_mx mul_mx_scalar scalerA.
by rewrite -expr2 exprVn.
Qed.

(* D is unchanged by every conformal A, for every w, g, H (T4 (iii) ⇒ (ii)) *)
Lemma coupledD_conformal A w g H : conformal A ->
  coupledD (act_w A w) (act_g A g) (act_H A H) = coupledD w g H.
Proof.
move=> cA; have Au := conformal_unit cA.
by rewrite coupledD_act // ((T4_ii_iii Au).2 cA) -coupledDE.
Qed.

(* the block map A = α I, α <> 0: ‖g‖² and RQ scale by α⁻², wᵀHw and wᵀg are unchanged *)
Theorem T3_scalar_block (a : R) w g H : a != 0 ->
  [/\ sqnorm (act_g a%:M g) = a ^- 2 * sqnorm g,
      RQ (act_H a%:M H) (act_w a%:M w) = a ^- 2 * RQ H w,
      quad (act_H a%:M H) (act_w a%:M w) = quad H w &
      dot (act_w a%:M w) (act_g a%:M g) = dot w g].
Proof.
move=> a0; have cA := scalar_conformal a0; have Au := conformal_unit cA.
split.
- by rewrite act_g_scalar sqnormZ exprVn.
- rewrite /RQ quad_act // act_w_scalar sqnormZ invfM.
  by set q := quad H w; set t := (sqnorm w)^-1; field; exact: a0.
- exact: quad_act.
- exact: dot_act.
Qed.

(* ... and D, D⁺ are unchanged *)
Theorem T3_scalar_block_D (a : R) w g H : a != 0 ->
  coupledD (act_w a%:M w) (act_g a%:M g) (act_H a%:M H) = coupledD w g H /\
  coupledDplus (act_w a%:M w) (act_g a%:M g) (act_H a%:M H) = coupledDplus w g H.
Proof.
move=> a0; have cA := scalar_conformal a0.
by split; [exact: coupledD_conformal | exact: T7_Dplus_invariant].
Qed.

(* W_l and b_l under the layer map (α = c > 0): ‖g‖² and RQ scale by c⁻² *)
Corollary T3_layer_l (c : R) w g H : 0 < c ->
  sqnorm (act_g c%:M g) = c ^- 2 * sqnorm g /\
  RQ (act_H c%:M H) (act_w c%:M w) = c ^- 2 * RQ H w.
Proof. by move=> c0; have [h1 h2 _ _] := T3_scalar_block w g H (lt0r_neq0 c0). Qed.

(* W_{l+1} under the layer map (α = c^{-k}): ‖g‖² and RQ scale by c^{2k} *)
Corollary T3_layer_next (c : R) (k : nat) w g H : 0 < c ->
  sqnorm (act_g (c ^- k)%:M g) = c ^+ (2 * k) * sqnorm g /\
  RQ (act_H (c ^- k)%:M H) (act_w (c ^- k)%:M w) = c ^+ (2 * k) * RQ H w.
Proof.
move=> c0; have a0 : c ^- k != 0 by rewrite invr_eq0 expf_neq0 // lt0r_neq0.
have [h1 h2 _ _] := T3_scalar_block w g H a0.
by rewrite h1 h2 exprVn invrK -exprM mulnC.
Qed.

End T3.
